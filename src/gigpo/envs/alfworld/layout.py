"""Seeded household layouts and tasks in ALFWorld's vocabulary, solvable by construction.

A :class:`Game` is a room (ALFRED's receptacle types, numbered the ALFWorld way: ``cabinet 1``, ``cabinet 2``,
...), the objects in its receptacles, one task of the six types, its goal text (ALFWorld's templates) and a
walkthrough built from the layout. It is rendered to a PDDL problem over ALFWorld's own domain
(:mod:`gigpo.envs.alfworld.pddl`) and played by TextWorld's PDDL engine; the walkthrough is checked by playing it.

Rooms follow ALFWorld's split of tasks over scenes: heat/cool need a kitchen (microwave, fridge), clean a
kitchen or bathroom (sinkbasin), look a bedroom or living room (desklamp); pick/pick2 any room.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gigpo.envs.alfworld.tasks import BY_SHORT, TaskType

#: Receptacle types per room: (ALFRED type, openable, min count, max count).
ROOMS: dict[str, tuple[tuple[str, bool, int, int], ...]] = {
    "kitchen": (("Cabinet", True, 3, 9), ("CounterTop", False, 1, 3), ("Drawer", True, 1, 6),
                ("Fridge", True, 1, 1), ("Microwave", True, 1, 1), ("SinkBasin", False, 1, 1),
                ("StoveBurner", False, 2, 4), ("CoffeeMachine", False, 1, 1), ("DiningTable", False, 0, 1),
                ("Shelf", False, 0, 3), ("GarbageCan", False, 1, 1), ("Toaster", False, 0, 1)),
    "livingroom": (("Sofa", False, 1, 1), ("ArmChair", False, 0, 2), ("CoffeeTable", False, 1, 1),
                   ("SideTable", False, 1, 2), ("Shelf", False, 0, 4), ("Drawer", True, 0, 4),
                   ("Cabinet", True, 0, 4), ("TVStand", False, 0, 1), ("Dresser", False, 0, 1),
                   ("GarbageCan", False, 1, 1), ("DiningTable", False, 0, 1)),
    "bedroom": (("Bed", False, 1, 1), ("Desk", False, 0, 1), ("SideTable", False, 1, 2), ("Drawer", True, 2, 6),
                ("Dresser", False, 0, 1), ("Shelf", False, 0, 4), ("GarbageCan", False, 1, 1),
                ("Safe", True, 0, 1), ("LaundryHamper", False, 0, 1), ("ArmChair", False, 0, 1)),
    "bathroom": (("Toilet", False, 1, 1), ("Cabinet", True, 2, 4), ("CounterTop", False, 1, 1),
                 ("SinkBasin", False, 1, 2), ("Drawer", True, 0, 4), ("GarbageCan", False, 1, 1),
                 ("TowelHolder", False, 1, 1), ("HandTowelHolder", False, 0, 1), ("ToiletPaperHanger", False, 1, 1),
                 ("Shelf", False, 0, 2), ("BathtubBasin", False, 0, 1)),
}

#: Object types per room.
ROOM_OBJECTS: dict[str, tuple[str, ...]] = {
    "kitchen": ("Apple", "Bread", "Potato", "Tomato", "Egg", "Lettuce", "Mug", "Cup", "Plate", "Bowl", "Pan", "Pot",
                "Knife", "Fork", "Spoon", "Spatula", "Ladle", "ButterKnife", "SaltShaker", "PepperShaker",
                "DishSponge", "SoapBottle", "Kettle", "WineBottle"),
    "livingroom": ("Book", "CellPhone", "CreditCard", "KeyChain", "RemoteControl", "Pillow", "Laptop", "Statue",
                   "Vase", "Box", "Newspaper", "Watch", "Bowl", "Mug", "TissueBox"),
    "bedroom": ("Book", "CellPhone", "CreditCard", "KeyChain", "AlarmClock", "Pillow", "Laptop", "CD", "Pen",
                "Pencil", "Bowl", "Mug", "Watch", "TissueBox"),
    "bathroom": ("SoapBar", "Cloth", "SoapBottle", "SprayBottle", "ToiletPaper", "Candle", "Towel", "HandTowel",
                 "Plunger", "ScrubBrush", "TissueBox"),
}

# ALFRED's object properties (the PDDL predicates heatable / coolable / cleanable).
HEATABLE = frozenset({"Apple", "Bread", "Cup", "Egg", "Mug", "Plate", "Potato", "Tomato"})
COOLABLE = frozenset({"Apple", "Bowl", "Bread", "Cup", "Egg", "Lettuce", "Mug", "Pan", "Plate", "Pot", "Potato",
                      "Tomato", "WineBottle"})
CLEANABLE = frozenset({"Apple", "Bowl", "ButterKnife", "Cloth", "Cup", "DishSponge", "Egg", "Fork", "Kettle",
                       "Knife", "Ladle", "Lettuce", "Mug", "Pan", "Plate", "Pot", "Potato", "SoapBar", "Spatula",
                       "Spoon", "Tomato"})
_SMALL = ("CellPhone", "CreditCard", "KeyChain", "RemoteControl", "Watch", "Pen", "Pencil", "CD", "Book",
          "AlarmClock", "TissueBox", "Newspaper", "Box", "Statue", "Vase", "Laptop", "Pillow", "Bowl", "Mug")
_FOOD = ("Apple", "Bread", "Potato", "Tomato", "Egg", "Lettuce")
_DISH = ("Mug", "Cup", "Plate", "Bowl", "Pan", "Pot", "Kettle")
_UTENSIL = ("Knife", "Fork", "Spoon", "Spatula", "Ladle", "ButterKnife", "DishSponge")
_BOTTLE = ("SaltShaker", "PepperShaker", "SoapBottle", "WineBottle")
_BATH = ("SoapBar", "Cloth", "SoapBottle", "SprayBottle", "ToiletPaper", "Candle", "TissueBox", "ScrubBrush")
_TABLE = _FOOD + _DISH + _UTENSIL + _BOTTLE + _SMALL + _BATH
#: Which object types each receptacle type can hold (the PDDL canContain facts).
CAN_CONTAIN: dict[str, frozenset[str]] = {
    "Cabinet": frozenset(_DISH + _BOTTLE + _BATH + ("Book", "Box", "Vase", "Statue", "TissueBox", "Bowl")),
    "CounterTop": frozenset(_TABLE), "DiningTable": frozenset(_TABLE), "Desk": frozenset(_SMALL),
    "Drawer": frozenset(_UTENSIL + ("CellPhone", "CreditCard", "KeyChain", "RemoteControl", "Watch", "Pen", "Pencil",
                                    "CD", "Book", "SoapBar", "Cloth", "Candle", "ToiletPaper", "SprayBottle")),
    "Fridge": frozenset(_FOOD + _DISH + ("WineBottle",)), "Microwave": frozenset(("Mug", "Cup", "Plate", "Bowl") + _FOOD),
    "SinkBasin": frozenset(_DISH + _UTENSIL + _FOOD + ("SoapBar", "Cloth")), "StoveBurner": frozenset(("Pan", "Pot", "Kettle")),
    "CoffeeMachine": frozenset(("Mug", "Cup")), "Shelf": frozenset(_SMALL + _DISH + _BOTTLE + _BATH),
    "GarbageCan": frozenset(_FOOD + ("Newspaper", "CD", "Pen", "Pencil", "TissueBox", "SoapBar", "Cloth",
                                     "ToiletPaper", "SprayBottle", "SoapBottle", "Candle", "DishSponge")),
    "Toaster": frozenset(("Bread",)), "Sofa": frozenset(("Pillow", "Laptop", "CellPhone", "RemoteControl", "Book",
                                                      "Newspaper", "CreditCard", "KeyChain", "Box")),
    "ArmChair": frozenset(("Pillow", "Laptop", "CellPhone", "RemoteControl", "Book", "Newspaper", "CreditCard",
                           "KeyChain", "Box")),
    "CoffeeTable": frozenset(_SMALL), "SideTable": frozenset(_SMALL + ("Candle",)), "TVStand": frozenset(_SMALL),
    "Dresser": frozenset(_SMALL + ("Candle", "SprayBottle")), "Bed": frozenset(("Pillow", "Laptop", "CellPhone",
                                                                                  "Book", "CD", "CreditCard")),
    "Safe": frozenset(("CellPhone", "CreditCard", "KeyChain", "Watch", "CD", "Statue", "Vase")),
    "LaundryHamper": frozenset(("Cloth", "Towel", "Pillow")), "Toilet": frozenset(("SoapBar", "SprayBottle",
                                                                                    "ToiletPaper", "Candle", "Cloth", "SoapBottle")),
    "TowelHolder": frozenset(("Towel",)), "HandTowelHolder": frozenset(("HandTowel",)),
    "ToiletPaperHanger": frozenset(("ToiletPaper",)), "BathtubBasin": frozenset(("SoapBar", "Cloth", "SoapBottle")),
}
#: Receptacles the lamp of a look task stands on.
LAMP_STANDS = ("SideTable", "Desk", "Dresser")
#: Receptacle types never chosen as the goal receptacle (the appliance a task uses, or holders of one object type).
_NOT_GOALS = {"Heat": {"Microwave"}, "Cool": {"Fridge"}, "Clean": {"SinkBasin"}}
_SINGLE_USE = {"TowelHolder", "HandTowelHolder", "ToiletPaperHanger", "Toaster", "CoffeeMachine", "StoveBurner"}
_ROOMS_FOR = {"Pick": tuple(ROOMS), "Pick2": tuple(ROOMS), "Look": ("livingroom", "bedroom"),
              "Clean": ("kitchen", "bathroom"), "Heat": ("kitchen",), "Cool": ("kitchen",)}


@dataclass(frozen=True)
class Receptacle:
    kind: str  #: ALFRED type, e.g. "CounterTop"
    number: int
    openable: bool

    @property
    def name(self) -> str:
        """ALFWorld's display name: ``countertop 2``."""
        return f"{self.kind.lower()} {self.number}"


@dataclass(frozen=True)
class Item:
    kind: str
    number: int
    place: int  #: index into Game.receptacles

    @property
    def name(self) -> str:
        return f"{self.kind.lower()} {self.number}"


@dataclass(frozen=True)
class Game:
    room: str
    receptacles: tuple[Receptacle, ...]
    items: tuple[Item, ...]
    task: TaskType
    obj: str  #: goal object type
    recep: str  #: goal receptacle type ("" for look)
    toggle: str  #: lamp type for look ("" otherwise)
    goal: str  #: the goal text, ALFWorld's template filled in
    walkthrough: tuple[str, ...]

    def signature(self) -> tuple:
        """What makes two games the same game (used to keep held-out games apart from training games)."""
        return (self.room, self.receptacles, self.items, self.task.short, self.obj, self.recep, self.goal)


def _room(rng: np.random.Generator, room: str) -> list[Receptacle]:
    out: list[Receptacle] = []
    for kind, openable, lo, hi in ROOMS[room]:
        out += [Receptacle(kind, i + 1, openable) for i in range(int(rng.integers(lo, hi + 1)))]
    return out


def generate(rng: np.random.Generator, task_short: str | None = None) -> Game:
    """One game from ``rng``; ``task_short`` (``Pick`` ... ``Pick2``) fixes the task type, else it is uniform.
    Retries the (cheap) draw until the task's constraints hold: the goal object placeable in the goal
    receptacle type, no goal object already in a goal receptacle, two instances for pick2."""
    short = task_short or str(rng.choice(list(BY_SHORT)))
    task = BY_SHORT[short]
    for _ in range(1000):
        game = _try(rng, task)
        if game is not None:
            return game
    raise RuntimeError(f"could not draw a {short} game")  # unreachable with the tables above


def _try(rng: np.random.Generator, task: TaskType) -> Game | None:
    short = task.short
    room = str(rng.choice(_ROOMS_FOR[short]))
    receps = _room(rng, room)
    kinds = sorted({r.kind for r in receps})
    objs = [o for o in ROOM_OBJECTS[room] if {"Heat": HEATABLE, "Cool": COOLABLE, "Clean": CLEANABLE}.get(short, {o}).__contains__(o)]
    obj = str(rng.choice(objs))
    toggle, recep = "", ""
    if short == "Look":
        stands = [i for i, r in enumerate(receps) if r.kind in LAMP_STANDS]
        if not stands:
            return None
        toggle = "DeskLamp"
    else:
        goals = [k for k in kinds if obj in CAN_CONTAIN[k] and k not in _NOT_GOALS.get(short, ()) and k not in _SINGLE_USE]
        if not goals:
            return None
        recep = str(rng.choice(goals))
    # place objects: the goal object (1-3 instances; 2-3 for pick2) outside goal receptacles, plus distractors
    n_goal = int(rng.integers(2, 4)) if short == "Pick2" else int(rng.integers(1, 4))
    sources = [i for i, r in enumerate(receps) if obj in CAN_CONTAIN[r.kind] and r.kind != recep]
    if not sources:
        return None
    placed: list[tuple[str, int]] = [(obj, int(rng.choice(sources))) for _ in range(n_goal)]
    others = [o for o in ROOM_OBJECTS[room] if o != obj]
    for o in rng.choice(others, size=min(len(others), int(rng.integers(6, 13))), replace=False):
        homes = [i for i, r in enumerate(receps) if str(o) in CAN_CONTAIN[r.kind]]
        for _ in range(int(rng.integers(1, 3)) if homes else 0):
            placed.append((str(o), int(rng.choice(homes))))
    if short == "Look":
        placed.append((toggle, int(rng.choice(stands))))
    counts: dict[str, int] = {}
    items = []
    for kind, place in placed:
        counts[kind] = counts.get(kind, 0) + 1
        items.append(Item(kind, counts[kind], place))
    template = str(rng.choice(task.templates))
    goal = template.format(obj=obj.lower(), recep=recep.lower(), toggle=toggle.lower())
    game = Game(room, tuple(receps), tuple(items), task, obj, recep, toggle, goal, ())
    return Game(**{**game.__dict__, "walkthrough": tuple(walkthrough(game))})


def walkthrough(game: Game) -> list[str]:
    """Commands that solve ``game`` from its start, built from the layout (ALFWorld's command grammar)."""
    receps, cmds = game.receptacles, []
    opened: set[int] = set()
    here = [-1]

    def visit(i: int) -> None:
        if here[0] != i:
            cmds.append(f"go to {receps[i].name}")
            here[0] = i
        if receps[i].openable and i not in opened:
            cmds.append(f"open {receps[i].name}")
            opened.add(i)

    targets = [it for it in game.items if it.kind == game.obj]
    short = game.task.short
    if short == "Look":
        lamp = next(it for it in game.items if it.kind == game.toggle)
        it = targets[0]
        visit(it.place)
        cmds.append(f"take {it.name} from {receps[it.place].name}")
        visit(lamp.place)
        cmds.append(f"use {lamp.name}")
        return cmds
    goal_i = next(i for i, r in enumerate(receps) if r.kind == game.recep)
    appliance = {"Clean": ("clean", "SinkBasin"), "Heat": ("heat", "Microwave"), "Cool": ("cool", "Fridge")}.get(short)
    for it in targets[: 2 if short == "Pick2" else 1]:
        visit(it.place)
        cmds.append(f"take {it.name} from {receps[it.place].name}")
        if appliance:
            verb, kind = appliance
            a = next(i for i, r in enumerate(receps) if r.kind == kind)
            if here[0] != a:
                cmds.append(f"go to {receps[a].name}")
                here[0] = a
            cmds.append(f"{verb} {it.name} with {receps[a].name}")
        visit(goal_i)
        cmds.append(f"move {it.name} to {receps[goal_i].name}")
    return cmds
