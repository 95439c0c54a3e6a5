"""ALFWorld's six task types: names, goal templates and PDDL goals (as in ALFWorld's ``gen/goal_library``).

A real game's type is the prefix of its trial folder (``pick_heat_then_place_in_recep-Egg-None-Fridge-13/...``)
and the ``task_type`` of its ``traj_data.json``; the GiGPO paper reports them in the column order of
:data:`PAPER_ORDER` (then ``All``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskType:
    #: ALFWorld's identifier (the trial folder prefix and ``traj_data.json``'s ``task_type``)
    name: str
    #: the column name of the GiGPO paper's ALFWorld table
    short: str
    #: ALFWorld's templated goal texts; ``{obj}``, ``{recep}``, ``{toggle}`` are lower-case type names
    templates: tuple[str, ...]


TASK_TYPES: tuple[TaskType, ...] = (
    TaskType("pick_and_place_simple", "Pick", ("put a {obj} in {recep}", "put some {obj} on {recep}")),
    TaskType("look_at_obj_in_light", "Look", ("look at {obj} under the {toggle}", "examine the {obj} with the {toggle}")),
    TaskType("pick_clean_then_place_in_recep", "Clean",
             ("put a clean {obj} in {recep}", "clean some {obj} and put it in {recep}")),
    TaskType("pick_heat_then_place_in_recep", "Heat",
             ("put a hot {obj} in {recep}", "heat some {obj} and put it in {recep}")),
    TaskType("pick_cool_then_place_in_recep", "Cool",
             ("put a cool {obj} in {recep}", "cool some {obj} and put it in {recep}")),
    TaskType("pick_two_obj_and_place", "Pick2", ("put two {obj} in {recep}", "find two {obj} and put them in {recep}")),
)
BY_NAME = {t.name: t for t in TASK_TYPES}
BY_SHORT = {t.short: t for t in TASK_TYPES}
#: the GiGPO paper's column order of per-task success (its table also has "All", the mean over episodes)
PAPER_ORDER: tuple[str, ...] = tuple(t.short for t in TASK_TYPES)


def task_type_of(path_or_name: str) -> TaskType | None:
    """The task type named by an ALFWorld trial path or folder name (``.../pick_two_obj_and_place-...``), or
    ``None`` when no part of it starts with a known type (the movable-receptacle and sliced variants ALFWorld's
    text games leave out are not known types)."""
    for part in reversed(str(path_or_name).replace("\\", "/").split("/")):
        head = part.split("-", 1)[0]
        if head in BY_NAME:
            return BY_NAME[head]
    return None


def pddl_goal(task: TaskType, obj: str, recep: str = "", toggle: str = "") -> str:
    """The PDDL ``(:goal ...)`` of ``task`` over ALFWorld's type constants (``MugType``, ``ShelfType``, ...).
    ``obj``/``recep``/``toggle``: CamelCase ALFRED type names (``Mug``, ``CounterTop``, ``DeskLamp``)."""
    where = f"(receptacleType ?r {recep}Type)"
    if task.short == "Look":
        return ("(:goal (and (exists (?ot - object ?r - receptacle ?a - agent ?l - location) (and "
                f"(objectType ?ot {toggle}Type) (toggleable ?ot) (isToggled ?ot) (receptacleAtLocation ?r ?l) "
                "(atLocation ?a ?l) (inReceptacle ?ot ?r))) "
                f"(exists (?o - object ?a - agent) (and (objectType ?o {obj}Type) (holds ?a ?o)))))")
    if task.short == "Pick2":
        return ("(:goal (and (exists (?r - receptacle) (exists (?o1 - object) (and "
                f"(objectType ?o1 {obj}Type) {where} (inReceptacle ?o1 ?r) (exists (?o2 - object) (and "
                f"(not (= ?o1 ?o2)) (objectType ?o2 {obj}Type) (inReceptacle ?o2 ?r))))))))")
    state = {"Pick": "", "Clean": "(cleanable ?o) (isClean ?o) ", "Heat": "(heatable ?o) (isHot ?o) ",
             "Cool": "(coolable ?o) (isCool ?o) "}[task.short]
    return ("(:goal (and (exists (?r - receptacle) (exists (?o - object) (and "
            f"{state}(objectType ?o {obj}Type) {where} (inReceptacle ?o ?r))))))")
