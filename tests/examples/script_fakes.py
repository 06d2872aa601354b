"""Stand-ins for running the examples/gpu scripts for real without training: a fake project python.

Shared by tests/examples/test_gpu_scripts.py, test_rehearsal_multinode.py and test_rehearsal_resume.py (imported by
name from this folder: pytest's rootdir import mode puts it on sys.path, as tests/agents does with ``env_names``).
The scripts take it as ``PYTHON``; it records every call in ``$FAKE_LOG``, one line each, and answers the calls the
scripts make:

- ``-m gaca_openrlhf.cli.train_ppo``: exits ``$FAKE_TRAIN_EXIT`` (0);
- ``-m gaca_openrlhf.preflight``: exits ``$FAKE_PREFLIGHT_EXIT`` (0);
- ``-m gaca_openrlhf.cpu.local_cluster start`` prints the address 127.0.0.1:4242, ``... stop`` removes its
  ``--state-dir``; ``-m gaca_openrlhf.cpu.rehearsal_check`` exits ``$FAKE_CHECK_EXIT`` (0);
- ``-m agents.alfworld generate`` makes the ``--out`` game folder (recording ``--num-games``) and
  ``-m gaca_openrlhf.rollout.tasks alfworld`` writes one task per generated game (with ``--holdout N
  --holdout-out F``, the first N to F, as the real tool leaves them out of ``--out``);
- anything else: exits ``$FAKE_EXIT`` (0).

With ``FAKE_LOG_RAY_ADDRESS=1`` each recorded line starts with ``RAY_ADDRESS=<the caller's RAY_ADDRESS> ``.
"""
from __future__ import annotations

from pathlib import Path

#: the case arms above; :func:`write_fake_python` puts a test's own arms before them (bash takes the first match)
FAKE_PYTHON = r"""#!/usr/bin/env bash
# stands in for the project's python (tests/examples/script_fakes.py): records each call, answers what scripts check
if [[ "${FAKE_LOG_RAY_ADDRESS:-0}" == 1 ]]; then echo "RAY_ADDRESS=${RAY_ADDRESS:-} $*"; else echo "$*"; fi >> "$FAKE_LOG"
arg() { local want="$1"; shift; while (( $# )); do [[ "$1" == "$want" ]] && { echo "$2"; return; }; shift; done; }
case "$*" in
#EXTRA_CASES#
  "-m gaca_openrlhf.cpu.local_cluster start"*) echo "started" >&2; echo "127.0.0.1:4242"; exit 0 ;;
  "-m gaca_openrlhf.cpu.local_cluster stop"*) rm -rf "$(arg --state-dir "$@")"; exit 0 ;;
  "-m gaca_openrlhf.cpu.rehearsal_check"*) exit "${FAKE_CHECK_EXIT:-0}" ;;
  "-m gaca_openrlhf.preflight"*) exit "${FAKE_PREFLIGHT_EXIT:-0}" ;;
  "-m gaca_openrlhf.cli.train_ppo"*) exit "${FAKE_TRAIN_EXIT:-0}" ;;
  "-m agents.alfworld generate"*) out="$(arg --out "$@")"; mkdir -p "$out/json_2.1.1/train"
                                 arg --num-games "$@" > "$out/num_games" ;;
  "-m gaca_openrlhf.rollout.tasks alfworld"*)
    data="$(arg --data "$@")"; out="$(arg --out "$@")"; mkdir -p "$(dirname "$out")"
    held="$(arg --holdout "$@")"; held="${held:-0}"
    for i in $(seq $((held + 1)) "$(cat "$data/num_games")"); do echo "{\"input\": \"game$i\"}"; done > "$out"
    if (( held > 0 )); then
      for i in $(seq 1 "$held"); do echo "{\"input\": \"game$i\"}"; done > "$(arg --holdout-out "$@")"
    fi ;;
esac
exit "${FAKE_EXIT:-0}"
"""


def fake_python_text(extra_cases: str = "") -> str:
    """The fake python's script, with ``extra_cases`` (bash ``case`` arms, e.g. ``'"-c import torch"*) exit 1 ;;'``)
    tried before the standard ones."""
    return FAKE_PYTHON.replace("#EXTRA_CASES#\n", extra_cases.rstrip("\n") + "\n" if extra_cases else "")


def write_fake_python(path, extra_cases: str = "") -> Path:
    """Write the fake python (:func:`fake_python_text`) to ``path``, executable; returns the path."""
    path = Path(path)
    path.write_text(fake_python_text(extra_cases))
    path.chmod(0o755)
    return path
