"""The real ALFWorld text engine: TextWorld's PDDL environment wrapped with ALFWorld's own wrappers.

``GameEngine`` = ``AlfredInfos(AlfredDemangler(CachedPddlEnv))`` -- the same stack ``AlfredTWEnv`` builds
(``alfworld.agents.environment.alfred_tw_env``), so observations, object names and admissible commands are
ALFWorld's. The only change is caching: TextWorld's ``PddlEnv`` re-parses the grammar on ``load`` and
re-translates the PDDL problem (Fast Downward's *translator*, 0.2-4 s) on every ``load`` **and** ``reset``.
``CachedPddlEnv`` keeps, per game file, the parsed grammar and the translated SAS task (LRU), so repeated
resets of one game only reload the SAS text into the search library (milliseconds).

Fast Downward's *planner* is never called here: the walkthroughs come from ALFWorld's handcoded expert
(:mod:`agents.alfworld.expert`), and ``policy_commands`` (which would call the planner) is never requested.

Two more caches make resets cheap for the group pattern (the n episodes of one task run on n workers):

- **on-disk translation cache** (node-wide, shared by every worker process): a translated game is pickled to
  ``$GACA_ALFWORLD_CACHE`` (default ``~/.cache/gaca/alfworld-translations``; ``0``/``off`` disables), keyed by the
  SHA-256 of the game file's content plus the TextWorld/Fast Downward/cache-format versions. The first process that
  misses takes a per-key ``flock`` and translates; concurrent processes wait on that lock and then read the entry
  instead of translating again. Entries are written to a temporary file and ``os.replace``d (atomic), so a reader
  never sees a partial entry; an unreadable entry counts as a miss and is rewritten.
- **initial-state derivations**: the intro text and the initial admissible commands (TextWorld derives every command
  from the grammar, ~20-90 ms) are the same on every reset of a game; they are computed once with ALFWorld's
  demangled names, stored with the translation, and reused when the live names match (otherwise derived normally).

Thread safety: TextWorld's grammar parser (tatsu), Fast Downward's translator (module globals, ``sys.argv``) and the
memo caches above are not thread-safe, so every ``GameEngine`` call holds one process-wide lock (``ENGINE_LOCK``):
concurrent in-process environments are correct but take turns. Each TextWorld ``PddlEnv`` loads its own copy of
the Fast Downward library, so environments do not share search state. For parallel throughput use the Ray backend
(one process per environment, :mod:`agents.alfworld.workers`).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pickle
import sys
import tempfile
import threading
import zlib
from copy import deepcopy
from collections import OrderedDict, Counter, defaultdict
from dataclasses import dataclass
from typing import Any

import textworld
from textworld.envs.pddl.pddl import PddlEnv
from textworld.envs.pddl import logic as pddl_logic
from textworld.core import GameState
from textworld.logic import Proposition, Variable
import fast_downward

from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
from alfworld.agents.utils.misc import Demangler

#: held by every GameEngine call (see module docstring): TextWorld's parser and Fast Downward's translator are not
#: thread-safe. Re-entrant so that helpers called under it may take it again.
ENGINE_LOCK = threading.RLock()

#: bump when the pickled layout of ``_Translated`` changes (old entries are then ignored, not misread)
CACHE_FORMAT = 4


# ---------------------------------------------------------------------------------------------- speedups
# TextWorld re-parses (with tatsu) the same grammar snippets and logic queries on every step: each admissible
# command's template, each feedback rule, each rule condition. Both parsers are pure functions of their input
# text, so their results are memoized (the grammar's symbols are deep-copied per use because derivation mutates
# them). Observations and commands are unchanged (tests/agents/alfworld compare both paths); steps get ~2-3x
# faster. Set GACA_ALFWORLD_NO_SPEEDUPS=1 to disable.
_SPEEDUPS_INSTALLED = False


def install_speedups() -> bool:
    global _SPEEDUPS_INSTALLED
    if _SPEEDUPS_INSTALLED or os.environ.get("GACA_ALFWORLD_NO_SPEEDUPS"):
        return _SPEEDUPS_INSTALLED
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    original_symbols = textgen._parse_and_convert
    symbol_cache: dict[tuple[str, str], Any] = {}

    def cached_parse_and_convert(*args, **kwargs):
        if len(args) == 1 and set(kwargs) <= {"rule_name", "trace"} and not kwargs.get("trace"):
            key = (args[0], kwargs.get("rule_name", ""))
            parsed = symbol_cache.get(key)
            if parsed is None:
                parsed = symbol_cache[key] = original_symbols(args[0], rule_name=kwargs.get("rule_name"))
            return deepcopy(parsed)
        return original_symbols(*args, **kwargs)

    original_query = Rule.parse_conjunctive_query.__func__
    query_cache: dict[str, Any] = {}

    def cached_query(cls, expr: str):
        rule = query_cache.get(expr)
        if rule is None:
            rule = query_cache[expr] = original_query(cls, expr)
        return rule

    textgen._parse_and_convert = cached_parse_and_convert
    Rule.parse_conjunctive_query = classmethod(cached_query)
    _SPEEDUPS_INSTALLED = True
    return True


@dataclass
class _Translated:
    """Everything ``PddlState.__init__`` derives from (domain, problem) that does not change during play."""

    data: dict
    logic: Any  # textworld.envs.pddl.logic.GameLogic
    task: Any  # _TaskInfo: what PddlState reads of Fast Downward's translated task
    sas: str
    sas_replan: str
    init_facts: list
    state_facts: list | None = None  # facts of the initial SAS state (filled by the first _CachedPddlState)
    initial: dict | None = None  # reset-time derivations (see _derive_initial)


class _CachedPddlState(pddl_logic.PddlState):
    """A ``PddlState`` built from a cached translation (same fields as TextWorld's constructor sets)."""

    def __init__(self, downward_lib, t: _Translated):  # noqa: D401 - do not call super().__init__ (re-translates)
        self._facts = defaultdict(set)
        self._vars_by_name = {}
        self._vars_by_type = defaultdict(set)
        self._var_counts = Counter()
        self._logic = t.logic
        self.downward_lib = downward_lib
        self.pddl_problem = t.data["pddl_problem"]
        self.task, self.sas, self.sas_replan = t.task, t.sas, t.sas_replan
        self._actions = {a.name: a for a in self.task.actions}
        self.downward_lib.load_sas(self.sas.encode("utf-8"))
        self.downward_lib.load_sas_replan(self.sas_replan.encode("utf-8"))
        self.name2type = {o.name: o.type_name for o in self.task.objects}
        self.add_facts(t.init_facts)
        if t.state_facts is None:  # the initial SAS state's facts: the same on every load of this game
            size = self.downward_lib.get_state_size()
            atoms = (pddl_logic.Atom * size)()
            self.downward_lib.get_state(atoms)
            facts = [atom.get_fact(self.name2type) for atom in atoms]
            t.state_facts = [f for f in facts if not f.is_negation]
        self.add_facts(t.state_facts)


@dataclass(frozen=True)
class _Param:
    name: str
    type_name: str


@dataclass(frozen=True)
class _ActionSchema:
    name: str
    parameters: tuple


@dataclass
class _TaskInfo:
    """The parts of Fast Downward's translated task that ``PddlState`` reads (action parameters, objects).
    Kept instead of the task itself: it is smaller, and Fast Downward's objects cache their ``hash()`` (string
    hashes differ between processes, so a pickled task would be corrupt in another process)."""

    actions: tuple
    objects: tuple  # of _Param (name, type_name)


def _translate(data: dict) -> _Translated:
    logic = pddl_logic.GameLogic(domain=data["pddl_domain"], grammar=data["grammar"])
    argv = list(sys.argv)  # Fast Downward's translator overwrites sys.argv (its option parsing); restore it
    try:
        task, sas = fast_downward.pddl2sas(logic.domain, data["pddl_problem"], verbose=False)
        _, sas_replan = fast_downward.pddl2sas(logic.domain, data["pddl_problem"], verbose=False, optimize=True)
    finally:
        sys.argv[:] = argv
    for type_ in task.types:
        try:
            logic.types.add(textworld.logic.Type(type_.name, type_.supertype_names))
        except ValueError:
            pass
    name2type = {o.name: o.type_name for o in task.objects}
    init = []
    for atom in task.init:
        if isinstance(atom, fast_downward.translate.pddl.conditions.Atom):
            if atom.predicate != "=":
                init.append(Proposition(atom.predicate, [Variable(a, name2type[a]) for a in atom.args]))
        elif isinstance(atom, fast_downward.translate.pddl.f_expression.Assign):
            if atom.fluent.symbol == "total-cost":
                continue
            name = f"{atom.expression.value}"
            if not name.isdigit():
                init.append(Proposition(name, [Variable(a, name2type[a]) for a in atom.fluent.args]))
    info = _TaskInfo(
        actions=tuple(_ActionSchema(a.name, tuple(_Param(p.name, p.type_name) for p in a.parameters))
                      for a in task.actions),
        objects=tuple(_Param(o.name, o.type_name) for o in task.objects))
    return _Translated(data=data, logic=logic, task=info, sas=sas, sas_replan=sas_replan, init_facts=init)


def _rebuild_logic(cls, fields: tuple):
    """Unpickle one of TextWorld's slotted logic objects and recompute its cached hash in *this* process (same
    formulas as their constructors; value equality, so skipping TextWorld's interning changes nothing)."""
    obj = object.__new__(cls)
    if cls is Proposition:
        from textworld.logic import Signature

        obj.name, obj.arguments = fields
        obj.signature = _rebuild_logic(Signature, (obj.name, tuple(v.type for v in obj.arguments)))
        obj._hash = hash((obj.name, obj.arguments))
    elif cls.__name__ == "Signature":
        obj.name, obj.types = fields
        obj._hash = hash((obj.name, obj.types))
    else:  # Variable, Placeholder
        obj.name, obj.type = fields
        obj._hash = hash((obj.name, obj.type))
    return obj


class _HashSafePickler(pickle.Pickler):
    """Pickles TextWorld's logic objects (Variable, Placeholder, Signature, Proposition) field by field: they cache
    ``hash()`` of strings in a slot, and string hashes are salted per process, so their default pickle would carry
    stale hashes into another process (sets and dicts of facts then silently miss)."""

    def reducer_override(self, obj):
        from textworld.logic import Placeholder, Signature

        t = type(obj)
        if t is Variable or t is Placeholder:
            return _rebuild_logic, (t, (obj.name, obj.type))
        if t is Signature:
            return _rebuild_logic, (t, (obj.name, tuple(obj.types)))
        if t is Proposition:
            return _rebuild_logic, (t, (obj.name, tuple(obj.arguments)))
        return NotImplemented


def _dumps(value) -> bytes:
    import io

    buf = io.BytesIO()
    _HashSafePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return buf.getvalue()


def _speedups_disabled() -> bool:
    return bool(os.environ.get("GACA_ALFWORLD_NO_SPEEDUPS"))


def disk_cache_dir() -> str | None:
    """Directory of the node-wide translation cache, or None when disabled (``GACA_ALFWORLD_CACHE=0``)."""
    value = os.environ.get("GACA_ALFWORLD_CACHE", "").strip()
    if value.lower() in ("0", "off", "false", "none", "no"):
        return None
    if value:
        return value
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gaca", "alfworld-translations")


def _versions_tag() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"format{CACHE_FORMAT}", f"py{sys.version_info[0]}.{sys.version_info[1]}"]
    for dist in ("textworld", "fast-downward-textworld", "alfworld"):
        try:
            parts.append(f"{dist}={version(dist)}")
        except PackageNotFoundError:
            parts.append(f"{dist}=?")
    return "|".join(parts)


class DiskCache:
    """Node-wide cache of translated games: ``<dir>/<sha256>.pkl.z`` (zlib-compressed pickle).

    Only this project writes these files (pickle: keep the directory private to the user, as the default is).
    ``get_or_create`` serializes creation per key across processes with ``flock`` on ``<key>.lock``.
    """

    def __init__(self, directory: str) -> None:
        self.dir = directory
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        self._tag = _versions_tag().encode()
        self.hits = 0
        self.misses = 0

    def key_of(self, gamefile: str) -> str:
        with open(gamefile, "rb") as f:
            return self.key_of_bytes(f.read())

    def key_of_bytes(self, content: bytes) -> str:
        """The key of a game file with these bytes (the versions tag, then the file's content)."""
        h = hashlib.sha256(self._tag)
        h.update(content)
        return h.hexdigest()

    def _path(self, key: str) -> str:
        return os.path.join(self.dir, key + ".pkl.z")

    def get(self, key: str):
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                blob = f.read()
        except FileNotFoundError:
            return None
        try:
            return pickle.loads(zlib.decompress(blob))
        except Exception:  # truncated/corrupt/old entry: a miss (it is rewritten atomically)
            return None

    def put(self, key: str, value) -> None:
        blob = zlib.compress(_dumps(value), 1)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=f".{key[:16]}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
            os.replace(tmp, self._path(key))  # atomic: readers see the old file or the whole new one
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get_or_create(self, key: str, make):
        """The entry for ``key``; on a miss, ``make()`` runs in exactly one process at a time per key."""
        value = self.get(key)
        if value is not None:
            self.hits += 1
            return value
        with open(os.path.join(self.dir, key + ".lock"), "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                value = self.get(key)  # another process may have written it while we waited
                if value is not None:
                    self.hits += 1
                    return value
                self.misses += 1
                value = make()
                self.put(key, value)
                return value
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _demangled_names(entity_infos: dict) -> dict[str, str]:
    """The names ``AlfredDemangler(shuffle=False)`` gives (same Demangler class, same order)."""
    demangler = Demangler(game_infos=entity_infos, shuffle=False)
    return {k: demangler.demangle_alfred_name(info.id) for k, info in entity_infos.items()}


def _derive_initial(pddl_state, logic, entity_infos: dict) -> dict:
    """What ``PddlEnv.reset`` derives from the grammar for the initial state: intro text and the admissible
    commands (same code path as ``PddlEnv.reset``/``_gather_infos``)."""
    context = {"state": pddl_state, "facts": list(pddl_state.facts), "variables": {}, "mapping": {},
               "entity_infos": entity_infos}
    feedback = logic.grammar.derive("#intro#", context)
    actions = list(pddl_state.all_applicable_actions())
    mapping = {k: info.name for k, info in entity_infos.items()}
    templates, commands = [], []
    for action in actions:
        ctx = {"state": pddl_state, "facts": list(pddl_state.facts),
               "variables": {ph.name: entity_infos[var.name] for ph, var in action.mapping.items()},
               "mapping": action.mapping, "entity_infos": entity_infos}
        action.command_template = logic.grammar.derive(action.command_template, ctx)
        templates.append(action.command_template)
        commands.append(action.format_command(mapping))
    return {"names": dict(mapping), "feedback": feedback, "action_ids": [a.id for a in actions],
            "templates": templates, "valid_commands": commands, "admissible": sorted(set(commands))}


class CachedPddlEnv(PddlEnv):
    """TextWorld's ``PddlEnv`` with an LRU cache of parsed/translated games, backed by the node-wide
    :class:`DiskCache` (see module docstring)."""

    def __init__(self, infos=None, cache_size: int = 32, disk_cache: str | None | bool = True) -> None:
        super().__init__(infos)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[str, _Translated] = OrderedDict()
        self._current: _Translated | None = None
        self._fresh = False  # the state built by load() has not been played yet: reset() may reuse it
        self.cache_hits = 0
        self.cache_misses = 0
        if disk_cache is True:
            disk_cache = disk_cache_dir()
        self.disk = DiskCache(disk_cache) if disk_cache else None

    def _prepare(self, data: dict) -> _Translated:
        """Translate a game and precompute its initial-state derivations (with ALFWorld's demangled names)."""
        t = _translate(data)
        if not _speedups_disabled():
            state = _CachedPddlState(self.downward_lib, t)
            saved = self._pddl_state if hasattr(self, "_pddl_state") else None
            self._pddl_state = state
            try:
                infos = self._get_entity_infos()
            finally:
                self._pddl_state = saved
            for k, name in _demangled_names(infos).items():
                infos[k].name = name
            t.initial = _derive_initial(state, t.logic, infos)
        return t

    def _lookup(self, key: str, data: dict | None) -> _Translated:
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            self.cache_hits += 1
            return hit
        self.cache_misses += 1
        if data is None and self.disk is not None:
            def make() -> _Translated:
                with open(key) as f:
                    return self._prepare(json.load(f))
            t = self.disk.get_or_create(self.disk.key_of(key), make)
        else:
            if data is None:
                with open(key) as f:
                    data = json.load(f)
            t = self._prepare(data)
        self._cache[key] = t
        while len(self._cache) > max(1, self.cache_size):
            self._cache.popitem(last=False)
        return t

    def load(self, filename_or_data) -> None:
        if isinstance(filename_or_data, str):
            key, data = filename_or_data, None
            self._game_file = filename_or_data
        else:
            data = filename_or_data
            key = "mem:" + str(hash(data["pddl_problem"] + data["grammar"]))
            self._game_file = None
        t = self._lookup(key, data)
        self._current = t
        self._game_data = t.data
        self.walkthrough = t.data.get("walkthrough", None)
        self._logic = t.logic
        self._pddl_state = _CachedPddlState(self.downward_lib, t)
        self._fresh = True
        self._entity_infos = self._get_entity_infos()

    def reset(self):
        # PddlEnv.reset rebuilds the state from the PDDL text (a full re-translation); rebuild it from the cache
        # instead. The rest mirrors PddlEnv.reset: intro text from the grammar, then the requested infos.
        assert self._current is not None, "call load() first"
        if not self._fresh:
            self._pddl_state = _CachedPddlState(self.downward_lib, self._current)
        self._fresh = False
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        initial = self._current.initial
        names = {k: info.name for k, info in self._entity_infos.items()}
        if initial is not None and initial["names"] == names and not _speedups_disabled():
            self.state.feedback = initial["feedback"]
            self.state.raw = self.state.feedback
            self._gather_initial_infos(initial)
        else:
            context = {
                "state": self._pddl_state,
                "facts": list(self._pddl_state.facts),
                "variables": {},
                "mapping": {},
                "entity_infos": self._entity_infos,
            }
            self.state.feedback = self._logic.grammar.derive("#intro#", context)
            self.state.raw = self.state.feedback
            self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = self.walkthrough or []
        return self.state

    def _gather_initial_infos(self, initial: dict) -> None:
        """``PddlEnv._gather_infos`` for the initial state, with the grammar derivations taken from the cache."""
        actions = list(self._pddl_state.all_applicable_actions())
        if [a.id for a in actions] != initial["action_ids"]:  # never expected; stay exact if it happens
            self._gather_infos()
            return
        self.state["command_templates"] = sorted(set(action.template for action in self._logic.actions.values()))
        self.state["won"] = self._pddl_state.check_goal()
        self.state["lost"] = False
        self.state["_entity_infos"] = dict(self._entity_infos)
        self.state["_facts"] = list(self._pddl_state.facts)
        if self.request_infos.facts:
            self.state["facts"] = list(map(self._get_human_readable_fact, self.state["_facts"]))
        self.state["last_action"] = None
        self.state["_last_action"] = self._last_action
        for action, template in zip(actions, initial["templates"]):
            action.command_template = template
        self.state["_valid_actions"] = actions
        self.state["_valid_commands"] = list(initial["valid_commands"])
        self.state["admissible_commands"] = list(initial["admissible"])
        if self.request_infos.moves:
            self.state["moves"] = self._moves
        if self.request_infos.policy_commands:
            self.state["policy_commands"] = self._pddl_state.replan(self._entity_infos)


class GameEngine:
    """One ALFWorld game at a time: ``load(path)``, ``reset()``, ``step(command)`` (TextWorld game states).

    request_facts: also return the PDDL facts (needed by the handcoded expert; costs a few ms per step).
    disk_cache: True = the node-wide cache at :func:`disk_cache_dir` (``$GACA_ALFWORLD_CACHE``), a directory, or
    None/False for none. Every call holds ``ENGINE_LOCK`` (thread safety, see module docstring).
    """

    def __init__(self, cache_size: int = 32, request_facts: bool = False, disk_cache: str | None | bool = True) -> None:
        with ENGINE_LOCK:
            install_speedups()
            infos = textworld.EnvInfos(won=True, admissible_commands=True, facts=request_facts,
                                       extras=["gamefile"])
            self._pddl = CachedPddlEnv(infos, cache_size=cache_size, disk_cache=disk_cache)
            self.env = AlfredInfos(AlfredDemangler(self._pddl, shuffle=False))
        self.loaded: str | None = None

    def load(self, gamefile: str) -> None:
        with ENGINE_LOCK:
            if self.loaded == gamefile:  # already the active game: reset() rebuilds its state from the cache
                self._pddl.cache_hits += 1
                return
            self.loaded = None
            self.env.load(gamefile)
            self.loaded = gamefile

    def reset(self):
        with ENGINE_LOCK:
            return self.env.reset()

    def step(self, command: str):
        with ENGINE_LOCK:
            return self.env.step(command)

    def facts(self) -> list:
        """The live PDDL facts of the current game state, read without stepping it (the oracle's input)."""
        with ENGINE_LOCK:
            return list(self._pddl._pddl_state.facts)

    @property
    def pddl_problem(self) -> str:
        """The PDDL problem (objects, initial state, goal) of the loaded game."""
        with ENGINE_LOCK:
            return self._pddl._game_data["pddl_problem"]

    @property
    def cache_info(self) -> dict[str, int]:
        info = {"hits": self._pddl.cache_hits, "misses": self._pddl.cache_misses, "size": len(self._pddl._cache)}
        if self._pddl.disk is not None:
            info.update(disk_hits=self._pddl.disk.hits, disk_misses=self._pddl.disk.misses)
        return info

    def cache_translation_as(self, played_file: str, game: dict, content: bytes, disk: "str | DiskCache") -> bool:
        """Store the translation of ``played_file`` (loaded by this engine, still in its memory cache) in the disk
        cache ``disk`` (a :class:`DiskCache` or its directory) under the key of a game file holding ``content`` --
        the same game (domain, problem, grammar) written elsewhere with more fields, ``game`` being its parsed
        content. The generator uses it: it has translated every game to validate it, so later readers of the written
        file need not translate it again. False when the played translation is not in memory (nothing is written)."""

        import dataclasses

        with ENGINE_LOCK:
            t = self._pddl._cache.get(played_file)
            if t is None:
                return False
            same = ("pddl_domain", "pddl_problem", "grammar")
            if any(t.data.get(k) != game.get(k) for k in same):
                raise ValueError(f"{played_file} is not the game to be cached (domain, problem or grammar differ)")
            if not isinstance(disk, DiskCache):
                disk = DiskCache(disk)
            disk.put(disk.key_of_bytes(content), dataclasses.replace(t, data=game))
            return True

    def close(self) -> None:
        with ENGINE_LOCK:
            self._pddl._cache.clear()
            self.loaded = None
