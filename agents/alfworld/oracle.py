"""Oracle progress for ALFWorld: the exact number of actions a full-knowledge agent still needs to win.

The credit audit (docs/credit_audit.md section 2) scores each step by its *progress*: the distance to the goal before
the step minus the distance after it (0 for a step that changes nothing, negative for one that undoes progress).
The distance is read from the engine's live PDDL facts (object locations, opened receptacles, held object, agent
location) without stepping the game, so the episode is not disturbed.

Exact for goals of the form "some object of type T inside some receptacle of type R" (``pick_and_place_simple``,
the quickstart's task type; :func:`goal_of` recognises it from the game's PDDL goal). Every other goal gets None:
no oracle, the step is left out of the audit.

The distance is a shortest-path search (uniform cost, i.e. breadth-first in actions) over the game's facts with
the domain's own actions (ALFWorld's ``GotoLocation``, ``OpenObject``, ``PickupObject``, ``PutObject`` and their
PDDL preconditions), restricted to the actions some shortest plan uses:

- ``take`` only T objects (anything else must be put down again, which a plan without it saves);
- ``move`` a T object only into an R receptacle (put elsewhere, it must be taken again), any other held object
  into any receptacle that can contain it (freeing the hands);
- ``go to`` and ``open`` only right before the take or put they enable: a ``go to`` followed by another is
  wasted, and an opening can wait until the agent uses that receptacle (it must stand there for both).

``close``, ``look``, ``examine``, ``inventory``, ``use``, ``heat``/``cool``/``clean`` and ``slice`` do not change
these facts or only remove a precondition, so no shortest plan needs them. Dropping the dominated actions keeps
the search exact (the tests replay the search's own plan in the real engine: it wins in exactly that many steps,
and no step of any played episode lowers the distance by more than one) and small: a plan has at most three
take/put acts, so a search visits tens of states.
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


@dataclass(frozen=True)
class PlaceGoal:
    """Some object of type ``obj_type`` inside some receptacle of type ``recep_type`` (lower-case PDDL types,
    e.g. ``booktype`` / ``shelftype``, as the facts spell them)."""

    obj_type: str
    recep_type: str


def goal_of(pddl_problem: str) -> Optional[PlaceGoal]:
    """The :class:`PlaceGoal` of a game's PDDL problem, or None when its goal is anything else (a heated, cleaned,
    cooled, sliced or lit object, two objects): the oracle is exact only for the plain placement."""
    m = _GOAL_BLOCK.search(pddl_problem)
    if m is None:
        raise ValueError("the PDDL problem has no (:goal ...) block")
    atoms = [(name.lower(), args.split()) for name, args in _ATOM.findall(m.group(1))]
    names = {a for a, _ in atoms}
    if names != _SIMPLE_PREDICATES or len(atoms) != 3:
        return None
    obj_t = next(args[1] for a, args in atoms if a == "objecttype")
    rec_t = next(args[1] for a, args in atoms if a == "receptacletype")
    if obj_t.startswith("?") or rec_t.startswith("?"):
        return None
    return PlaceGoal(obj_t.lower(), rec_t.lower())


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

    @classmethod
    def from_facts(cls, facts: Iterable, names: Optional[dict] = None) -> "World":
        """From TextWorld ``Proposition``s (``.name``, ``.arguments[i].name``), as the engine holds them.

        Raises ValueError when the agent's location is missing or not unique (not an ALFWorld state)."""
        agent_loc, held = [], []
        obj_in, recep_loc, obj_type, recep_type = {}, {}, {}, {}
        openable, opened, can_contain, pickupable = set(), set(), set(), set()
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
        if len(agent_loc) != 1:
            raise ValueError(f"expected one atLocation fact for the agent, got {len(agent_loc)}")
        if len(held) > 1:
            raise ValueError(f"the agent holds {len(held)} objects")
        return cls(agent_loc=agent_loc[0], held=held[0] if held else None, obj_in=obj_in, recep_loc=recep_loc,
                   obj_type=obj_type, recep_type=recep_type, openable=frozenset(openable),
                   opened=frozenset(opened), can_contain=frozenset(can_contain), pickupable=frozenset(pickupable),
                   names=dict(names or {}))


def plan(world: World, goal: PlaceGoal, max_cost: int = 16) -> Optional[list[tuple]]:
    """A shortest action sequence that wins from ``world`` (``[]`` when the goal already holds), each action a
    tuple ``("goto", location)``, ``("open", receptacle)``, ``("take", object, receptacle)`` or
    ``("put", object, receptacle)``; None when no plan of at most ``max_cost`` actions exists.

    The search runs over *acts*: go to a receptacle's location if not there, open it if it is closed, then take
    from it or put into it (1 to 3 actions). A shortest plan of single actions can always be written this way: a
    ``go to`` followed by another one is wasted, and an opening can wait until the agent uses that receptacle (it
    must stand there for both). Acts cost their number of actions, so the search is uniform-cost (Dijkstra)."""
    targets = [o for o, t in world.obj_type.items() if t == goal.obj_type and o in world.pickupable]
    goal_receps = frozenset(r for r, t in world.recep_type.items() if t == goal.recep_type)
    # objects of type T that cannot be picked up never move: in an R receptacle they already satisfy the goal
    fixed = [o for o, t in world.obj_type.items() if t == goal.obj_type and o not in world.pickupable]
    if any(world.obj_in.get(o) in goal_receps for o in fixed):
        return []
    other = world.held if world.held is not None and world.held not in targets else None
    tracked = tuple(sorted(set(targets) | ({other} if other else set())))
    if not tracked:
        return None
    idx = {o: i for i, o in enumerate(tracked)}
    loc_of = world.recep_loc

    def fits(r: str, o: str) -> bool:
        return (world.recep_type.get(r), world.obj_type.get(o)) in world.can_contain

    def won(pos: tuple) -> bool:
        return any(pos[idx[o]] in goal_receps for o in targets)

    start_pos = tuple(HELD if o == world.held else world.obj_in.get(o) for o in tracked)
    if won(start_pos):
        return []
    start = (world.agent_loc, start_pos, world.opened)
    best = {start: 0}
    parent: dict = {start: None}
    heap = [(0, 0, start)]
    tie = 0  # insertion counter: equal costs pop in insertion order (states themselves are not ordered)
    while heap:
        cost, _, state = heapq.heappop(heap)
        if cost > best[state]:
            continue
        loc, pos, opened = state
        if won(pos):
            return _unwind(parent, state)
        holding = next((o for o in tracked if pos[idx[o]] == HELD), None)
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
                              (loc_of[r], _moved(pos, idx[o], HELD), now_open), max_cost, tie := tie + 1)
            else:
                _push(heap, best, parent, state, cost, steps + [("put", holding, r)],
                      (loc_of[r], _moved(pos, idx[holding], r), now_open), max_cost, tie := tie + 1)
    return None


def _next_receptacles(holding, targets, goal_receps, pos, idx, loc_of, fits) -> list:
    """Receptacles the next act can use: with empty hands, one holding a T object; holding a T object, an R
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


def distance(world: World, goal: Optional[PlaceGoal]) -> Optional[int]:
    """Actions a full-knowledge agent still needs to win from ``world``; None without a supported goal or plan."""
    if goal is None:
        return None
    p = plan(world, goal)
    return None if p is None else len(p)


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
            here = [r for r, l in world.recep_loc.items() if l == a[1]]
            recep = nxt if nxt in here else sorted(here, key=name)[0]
            out.append(f"go to {name(recep)}")
        elif a[0] == "open":
            out.append(f"open {name(a[1])}")
        elif a[0] == "take":
            out.append(f"take {name(a[1])} from {name(a[2])}")
        else:
            out.append(f"move {name(a[1])} to {name(a[2])}")
    return out
