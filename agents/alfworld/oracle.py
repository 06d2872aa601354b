"""Oracle progress for ALFWorld: the exact number of actions a full-knowledge agent still needs to win.

The credit audit (docs/credit_audit.md section 2) scores each step by its *progress*: the distance to the goal before
the step minus the distance after it (0 for a step that changes nothing, negative for one that undoes progress).
The distance is read from the engine's live PDDL facts (object locations, opened receptacles, held object, agent
location) without stepping the game, so the episode is not disturbed.

Exact for goals "some object of type T inside some receptacle of type R" (``pick_and_place_simple``, the
quickstart's task type), the same with the object heated, cooled or cleaned first (``pick_heat/cool/clean_then_
place_in_recep``: one more act at a microwave, fridge or sink basin) and "two objects of type T in one receptacle of
type R" (``pick_two_obj_and_place``), and "hold an object of type T where a lamp of type L is switched on"
(``look_at_obj_in_light``, :func:`plan_light`); :func:`goal_of` recognises them from the game's PDDL goal. Any
other goal (e.g. sliced objects) gets None: no oracle, the step is left out of the audit.

The distance is a shortest-path search (uniform cost, i.e. breadth-first in actions) over the game's facts with
the domain's own actions (ALFWorld's ``GotoLocation``, ``OpenObject``, ``PickupObject``, ``PutObject`` and their
PDDL preconditions), restricted to the actions some shortest plan uses:

- ``take`` only T objects (anything else must be put down again, which a plan without it saves);
- ``heat``/``cool``/``clean`` only the held T object, untreated, and only that before it is placed (placed
  untreated, it would have to be taken again);
- ``move`` a T object only into an R receptacle (put elsewhere, it must be taken again), any other held object
  into any receptacle that can contain it (freeing the hands);
- ``go to`` and ``open`` only right before the take or put they enable: a ``go to`` followed by another is
  wasted, and an opening can wait until the agent uses that receptacle (it must stand there for both).

``close``, ``look``, ``examine``, ``inventory``, ``use``, ``slice`` and a treatment of anything else do not change
these facts or only remove a precondition, so no shortest plan needs them. Dropping the dominated actions keeps
the search exact (the tests replay the search's own plan in the real engine: it wins in exactly that many steps,
and no step of any played episode lowers the distance by more than one) and small: a plan has at most five
acts, so a search visits tens to hundreds of states.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass, field
from typing import Iterable, Optional

HELD = "<held>"  # position of an object in the agent's hands

_GOAL_BLOCK = re.compile(r"\(:goal(.*)\)\s*\)\s*$", re.S)
_ATOM = re.compile(r"\((\w+)((?:\s+[?\w-]+)+)\)")
_SIMPLE_PREDICATES = {"inreceptacle", "objecttype", "receptacletype"}


#: treatment predicate of a goal -> (the object's capability predicate, the appliance's receptacle type, the verb)
TREATMENTS = {
    "ishot": ("heatable", "microwavetype", "heat"),
    "iscool": ("coolable", "fridgetype", "cool"),
    "isclean": ("cleanable", "sinkbasintype", "clean"),
}


@dataclass(frozen=True)
class PlaceGoal:
    """``count`` distinct objects of type ``obj_type`` inside one receptacle of type ``recep_type`` (lower-case PDDL
    types, e.g. ``booktype`` / ``shelftype``, as the facts spell them), each first heated, cooled or cleaned when
    ``treatment`` is ``ishot`` / ``iscool`` / ``isclean``."""

    obj_type: str
    recep_type: str
    treatment: Optional[str] = None
    count: int = 1


@dataclass(frozen=True)
class LightGoal:
    """Hold an object of type ``obj_type`` where a lamp of type ``lamp_type`` has been switched on
    (``look_at_obj_in_light``)."""

    obj_type: str
    lamp_type: str


_LIGHT_PREDICATES = {"objecttype", "toggleable", "istoggled", "receptacleatlocation", "atlocation", "inreceptacle",
                     "holds"}


def goal_of(pddl_problem: str):
    """The goal of a game's PDDL problem: a :class:`PlaceGoal` for ALFWorld's ``pick_and_place_simple``,
    ``pick_heat/cool/clean_then_place_in_recep`` and ``pick_two_obj_and_place``, a :class:`LightGoal` for
    ``look_at_obj_in_light``; None for any other goal (sliced objects): no oracle rather than a wrong one."""
    m = _GOAL_BLOCK.search(pddl_problem)
    if m is None:
        raise ValueError("the PDDL problem has no (:goal ...) block")
    atoms = [(name.lower(), args.split()) for name, args in _ATOM.findall(m.group(1))]
    names = {a for a, _ in atoms}
    if names == _LIGHT_PREDICATES:
        held = {args[1] for a, args in atoms if a == "holds"}
        lit = {args[0] for a, args in atoms if a == "istoggled"}
        types = {args[0]: args[1].lower() for a, args in atoms if a == "objecttype"}
        obj_t = {types.get(v) for v in held}
        lamp_t = {types.get(v) for v in lit}
        if len(obj_t) == 1 and len(lamp_t) == 1 and None not in obj_t | lamp_t:
            return LightGoal(obj_t.pop(), lamp_t.pop())
        return None
    extra = names - _SIMPLE_PREDICATES
    treatment = None
    if extra:
        treatment = next((t for t, (cap, _, _) in TREATMENTS.items() if extra == {t, cap}), None)
        if treatment is None:
            return None
    if not _SIMPLE_PREDICATES <= names:
        return None
    obj_ts = {args[1].lower() for a, args in atoms if a == "objecttype"}
    rec_ts = {args[1].lower() for a, args in atoms if a == "receptacletype"}
    obj_vars = {args[0] for a, args in atoms if a == "objecttype"}
    if len(obj_ts) != 1 or len(rec_ts) != 1 or any(t.startswith("?") for t in obj_ts | rec_ts):
        return None
    count = len(obj_vars)
    if count not in (1, 2) or (count == 2 and treatment is not None):
        return None
    return PlaceGoal(obj_ts.pop(), rec_ts.pop(), treatment, count)


@dataclass(frozen=True)
class World:
    """The facts of one game state that the distance depends on (object and receptacle ids as in the PDDL).

    ``obj_in`` maps each object inside a receptacle to it; ``held`` is the object in the agent's hands (or None);
    ``names`` maps ids to the displayed names ("book 1"), used only to spell a plan as commands.
    """

    agent_loc: str
    held: Optional[str]
    obj_in: dict
    recep_loc: dict
    obj_type: dict
    recep_type: dict
    openable: frozenset
    opened: frozenset
    can_contain: frozenset  # (receptacle type, object type) pairs
    pickupable: frozenset
    names: dict = field(default_factory=dict)
    flags: dict = field(default_factory=dict)  # unary predicate (heatable, ishot, ...) -> frozenset of objects

    @classmethod
    def from_facts(cls, facts: Iterable, names: Optional[dict] = None) -> "World":
        """From TextWorld ``Proposition``s (``.name``, ``.arguments[i].name``), as the engine holds them.

        Raises ValueError when the agent's location is missing or not unique (not an ALFWorld state)."""
        agent_loc, held = [], []
        obj_in, recep_loc, obj_type, recep_type = {}, {}, {}, {}
        openable, opened, can_contain, pickupable = set(), set(), set(), set()
        flags: dict = {k: set() for t, (cap, _, _) in TREATMENTS.items() for k in (t, cap)}
        flags.update(toggleable=set(), istoggled=set())
        for f in facts:
            n, args = f.name.lower(), [a.name for a in f.arguments]
            if n == "atlocation":
                agent_loc.append(args[1])
            elif n == "holds":
                held.append(args[1])
            elif n == "inreceptacle":
                obj_in[args[0]] = args[1]
            elif n == "receptacleatlocation":
                recep_loc[args[0]] = args[1]
            elif n == "objecttype":
                obj_type[args[0]] = args[1].lower()
            elif n == "receptacletype":
                recep_type[args[0]] = args[1].lower()
            elif n == "openable":
                openable.add(args[0])
            elif n == "opened":
                opened.add(args[0])
            elif n == "cancontain":
                can_contain.add((args[0].lower(), args[1].lower()))
            elif n == "pickupable":
                pickupable.add(args[0])
            elif n in flags:
                flags[n].add(args[0])
        if len(agent_loc) != 1:
            raise ValueError(f"expected one atLocation fact for the agent, got {len(agent_loc)}")
        if len(held) > 1:
            raise ValueError(f"the agent holds {len(held)} objects")
        return cls(agent_loc=agent_loc[0], held=held[0] if held else None, obj_in=obj_in, recep_loc=recep_loc,
                   obj_type=obj_type, recep_type=recep_type, openable=frozenset(openable),
                   opened=frozenset(opened), can_contain=frozenset(can_contain), pickupable=frozenset(pickupable),
                   names=dict(names or {}), flags={k: frozenset(v) for k, v in flags.items()})


def plan(world: World, goal: PlaceGoal, max_cost: int = 24) -> Optional[list[tuple]]:
    """A shortest action sequence that wins from ``world`` (``[]`` when the goal already holds), each action a
    tuple ``("goto", location)``, ``("open", receptacle)``, ``("take", object, receptacle)``,
    ``("put", object, receptacle)`` or ``(verb, object, appliance)`` with verb heat / cool / clean; None when no
    plan of at most ``max_cost`` actions exists.

    The search runs over *acts*: go to a receptacle's location if not there, open it if it is closed (not for an
    appliance: the domain heats, cools and cleans with it closed), then take from it, put into it or treat the held
    object with it (1 to 3 actions). A shortest plan of single actions can always be written this way: a ``go to``
    followed by another one is wasted, and an opening can wait until the agent uses that receptacle (it must stand
    there for both). Acts cost their number of actions, so the search is uniform-cost (Dijkstra)."""
    cap, appliance, verb = TREATMENTS[goal.treatment] if goal.treatment else (None, None, None)
    targets = [o for o, t in world.obj_type.items() if t == goal.obj_type and o in world.pickupable
               and (cap is None or o in world.flags.get(cap, ()))]
    goal_receps = frozenset(r for r, t in world.recep_type.items() if t == goal.recep_type)
    appliances = sorted(r for r, t in world.recep_type.items() if t == appliance) if appliance else []
    if goal.count == 1 and goal.treatment is None:
        # objects of type T that cannot be picked up never move: in an R receptacle they already satisfy the goal
        fixed = [o for o, t in world.obj_type.items() if t == goal.obj_type and o not in world.pickupable]
        if any(world.obj_in.get(o) in goal_receps for o in fixed):
            return []
    other = world.held if world.held is not None and world.held not in targets else None
    tracked = tuple(sorted(set(targets) | ({other} if other else set())))
    if not targets:
        return None
    idx = {o: i for i, o in enumerate(tracked)}
    loc_of = world.recep_loc

    def fits(r: str, o: str) -> bool:
        return (world.recep_type.get(r), world.obj_type.get(o)) in world.can_contain

    def won(pos: tuple, treated: frozenset) -> bool:
        placed = [pos[idx[o]] for o in targets if pos[idx[o]] in goal_receps and (cap is None or o in treated)]
        return any(placed.count(r) >= goal.count for r in set(placed))

    start_pos = tuple(HELD if o == world.held else world.obj_in.get(o) for o in tracked)
    start_treated = frozenset(o for o in targets if goal.treatment and o in world.flags.get(goal.treatment, ()))
    if won(start_pos, start_treated):
        return []
    start = (world.agent_loc, start_pos, world.opened, start_treated)
    best = {start: 0}
    parent: dict = {start: None}
    heap = [(0, 0, start)]
    tie = 0  # insertion counter: equal costs pop in insertion order (states themselves are not ordered)
    while heap:
        cost, _, state = heapq.heappop(heap)
        if cost > best[state]:
            continue
        loc, pos, opened, treated = state
        if won(pos, treated):
            return _unwind(parent, state)
        holding = next((o for o in tracked if pos[idx[o]] == HELD), None)
        if holding is not None and cap is not None and holding in targets and holding not in treated:
            for r in appliances:  # the held object must be treated before it is placed
                steps = ([] if loc_of.get(r) == loc else [("goto", loc_of[r])]) + [(verb, holding, r)]
                _push(heap, best, parent, state, cost, steps, (loc_of[r], pos, opened, treated | {holding}),
                      max_cost, tie := tie + 1)
            continue
        for r in _next_receptacles(holding, targets, goal_receps, pos, idx, loc_of, fits):
            steps = [] if loc_of[r] == loc else [("goto", loc_of[r])]
            now_open = opened
            if r in world.openable and r not in opened:
                steps.append(("open", r))
                now_open = opened | {r}
            if holding is None:
                for o in targets:  # every T object in r is a different act
                    if pos[idx[o]] == r:
                        _push(heap, best, parent, state, cost, steps + [("take", o, r)],
                              (loc_of[r], _moved(pos, idx[o], HELD), now_open, treated), max_cost, tie := tie + 1)
            else:
                _push(heap, best, parent, state, cost, steps + [("put", holding, r)],
                      (loc_of[r], _moved(pos, idx[holding], r), now_open, treated), max_cost, tie := tie + 1)
    return None


def _next_receptacles(holding, targets, goal_receps, pos, idx, loc_of, fits) -> list:
    """Receptacles the next take or put can use: with empty hands, one holding a T object; holding a T object, an R
    receptacle (put elsewhere, it would have to be taken again); holding another object, any that can take it."""
    if holding is None:
        out = {pos[idx[o]] for o in targets if pos[idx[o]] not in (HELD, None)}
    elif holding in targets:
        out = {r for r in goal_receps if fits(r, holding)}
    else:
        out = {r for r in loc_of if fits(r, holding)}
    return sorted(r for r in out if r in loc_of)


def _push(heap, best, parent, state, cost, steps, nxt, max_cost, tie) -> None:
    new_cost = cost + len(steps)
    if new_cost > max_cost or new_cost >= best.get(nxt, max_cost + 1):
        return
    best[nxt] = new_cost
    parent[nxt] = (state, steps)
    heapq.heappush(heap, (new_cost, tie, nxt))


def _moved(pos: tuple, i: int, where: str) -> tuple:
    return pos[:i] + (where,) + pos[i + 1:]


def _unwind(parent: dict, state) -> list[tuple]:
    out = []
    while parent[state] is not None:
        state, steps = parent[state]
        out[:0] = steps
    return out


def distance(world: World, goal) -> Optional[int]:
    """Actions a full-knowledge agent still needs to win from ``world`` for ``goal`` (a :class:`PlaceGoal`, a
    :class:`LightGoal` or None); None without a supported goal or plan."""
    if goal is None:
        return None
    p = plan_light(world, goal) if isinstance(goal, LightGoal) else plan(world, goal)
    return None if p is None else len(p)


def plan_light(world: World, goal: LightGoal, max_cost: int = 16) -> Optional[list[tuple]]:
    """A shortest action sequence to hold an object of type T at the location of a switched-on lamp of type L
    (``("goto", location)``, ``("open", r)``, ``("take", o, r)``, ``("put", o, r)``, ``("use", lamp)``); ``[]`` when
    that already holds, None when no plan of at most ``max_cost`` actions exists. Acts as in :func:`plan`: take a
    T object, put a held other object down, switch a lamp on (at its receptacle's location), and, holding a T
    object, go to a lit lamp; a lamp, once switched on, stays ``isToggled``."""
    targets = [o for o, t in world.obj_type.items() if t == goal.obj_type and o in world.pickupable]
    lamps = [o for o, t in world.obj_type.items() if t == goal.lamp_type
             and o in world.flags.get("toggleable", ()) and world.obj_in.get(o) in world.recep_loc]
    if not targets or not lamps:
        return None
    loc_of = world.recep_loc
    lamp_loc = {lmp: loc_of[world.obj_in[lmp]] for lmp in lamps}

    def fits(r: str, o: str) -> bool:
        return (world.recep_type.get(r), world.obj_type.get(o)) in world.can_contain

    def done(loc, held, lit) -> bool:
        return held in targets and any(lamp_loc[lmp] == loc for lmp in lit)

    # state: (agent location, held object, where each T object is, lamps switched on, opened receptacles)
    start = (world.agent_loc, world.held, tuple(world.obj_in.get(o) for o in targets),
             frozenset(lmp for lmp in lamps if lmp in world.flags.get("istoggled", ())), world.opened)
    if done(start[0], start[1], start[3]):
        return []
    best = {start: 0}
    parent: dict = {start: None}
    heap = [(0, 0, start)]
    tie = 0
    while heap:
        cost, _, state = heapq.heappop(heap)
        if cost > best[state]:
            continue
        loc, held, pos, lit, opened = state
        if done(loc, held, lit):
            return _unwind(parent, state)
        moves = []
        for lmp in lamps:  # switch a lamp on (a lit one again would change nothing)
            if lmp not in lit:
                go = [] if lamp_loc[lmp] == loc else [("goto", lamp_loc[lmp])]
                moves.append((go + [("use", lmp)], (lamp_loc[lmp], held, pos, lit | {lmp}, opened)))
        if held in targets:
            for lmp in lit:
                if lamp_loc[lmp] != loc:
                    moves.append(([("goto", lamp_loc[lmp])], (lamp_loc[lmp], held, pos, lit, opened)))
        else:
            receps = ({pos[i] for i in range(len(targets)) if pos[i] is not None} if held is None
                      else {r for r in loc_of if fits(r, held)})
            for r in sorted(r for r in receps if r in loc_of):
                steps = [] if loc_of[r] == loc else [("goto", loc_of[r])]
                now_open = opened
                if r in world.openable and r not in opened:
                    steps.append(("open", r))
                    now_open = opened | {r}
                if held is None:
                    for i, o in enumerate(targets):
                        if pos[i] == r:
                            moves.append((steps + [("take", o, r)],
                                          (loc_of[r], o, _moved(pos, i, None), lit, now_open)))
                else:  # a held other object goes down first
                    moves.append((steps + [("put", held, r)], (loc_of[r], None, pos, lit, now_open)))
        for steps, nxt in moves:
            _push(heap, best, parent, state, cost, steps, nxt, max_cost, tie := tie + 1)
    return None


def progress(before: Optional[int], after: Optional[int]) -> Optional[float]:
    """Oracle progress of a step: the decrease of the distance (None when either side has no distance)."""
    if before is None or after is None:
        return None
    return float(before - after)


def commands(world: World, actions: list[tuple]) -> list[str]:
    """A plan spelled as ALFWorld commands ("go to shelf 1", "open cabinet 2", "take book 1 from desk 1",
    "move book 1 to shelf 1"), with the display names of ``world.names``. A ``goto`` names a receptacle at the
    target location, the one the plan uses next where there is one."""
    name = lambda x: world.names.get(x, x)  # noqa: E731
    out = []
    for i, a in enumerate(actions):
        if a[0] == "goto":
            nxt = next((b[-1] for b in actions[i + 1:i + 2] if b[0] != "goto"), None)
            nxt = world.obj_in.get(nxt, nxt)  # a lamp to use: name the receptacle it stands in
            here = [r for r, l in world.recep_loc.items() if l == a[1]]
            recep = nxt if nxt in here else sorted(here, key=name)[0]
            out.append(f"go to {name(recep)}")
        elif a[0] == "open":
            out.append(f"open {name(a[1])}")
        elif a[0] == "take":
            out.append(f"take {name(a[1])} from {name(a[2])}")
        elif a[0] == "put":
            out.append(f"move {name(a[1])} to {name(a[2])}")
        elif a[0] == "use":
            out.append(f"use {name(a[1])}")
        else:  # heat / cool / clean
            out.append(f"{a[0]} {name(a[1])} with {name(a[2])}")
    return out
