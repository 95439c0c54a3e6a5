"""A generated fictional encyclopedia (passages + single/two-hop question sets), cached atomically on disk.

Every entity name is invented from random syllables, so no pretrained model can know an answer without
retrieving it. Passage sentences follow fixed patterns per attribute (listed in ``RELATIONS``), which is what
lets the scripted oracle in ``oracle.py`` read answers out of retrieved text.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Bump when generation changes: the cache directory name includes it, so old caches are never reused.
CORPUS_VERSION = 1
DATA_SOURCES = ("fict-single", "fict-multihop")
SPLITS = ("train", "test")
#: Per source and split, at most this many questions (relations are interleaved round-robin before capping).
MAX_QUESTIONS = {"train": 4000, "test": 1000}
TEST_ENTITY_FRACTION = 0.2


@dataclass(frozen=True)
class Relation:
    """An attribute of an entity type: how a passage states it and how the oracle reads it back."""

    subject: str  # entity type that has the attribute
    target: str | None  # entity type of the value (None: a literal such as a year)
    pattern: str  # regex with one group; applied to passages titled with the subject's name
    keyword: str  # word the oracle adds to the entity name when searching for this attribute


RELATIONS: dict[str, Relation] = {
    "birth_year": Relation("person", None, r"was born in (\d{4}) in the city of", "born"),
    "birthplace": Relation("person", "city", r"was born in \d{4} in the city of ([^.]+)\.", "born"),
    "occupation": Relation("person", None, r"worked as an? (.+?) for the ", "worked"),
    "employer": Relation("person", "org", r"worked as an? .+? for the ([^.]+)\.", "worked"),
    "mentor": Relation("person", "person", r"trained under ([^.]+)\.", "trained"),
    "country": Relation("city", "country", r"is a city in ([^.]+)\.", "city"),
    "city_founded": Relation("city", None, r"The city was founded in (\d{4})\.", "founded"),
    "river": Relation("city", "river", r"The ([^.]+?) flows through", "river"),
    "capital": Relation("country", "city", r"whose capital is ([^.]+)\.", "capital"),
    "currency": Relation("country", None, r"Its currency is the ([^.]+)\.", "currency"),
    "language": Relation("country", None, r"The official language of .+? is ([^.]+)\.", "language"),
    "org_founded": Relation("org", None, r"It was founded in (\d{4}) by", "founded"),
    "founder": Relation("org", "person", r"It was founded in \d{4} by ([^.]+)\.", "founded"),
    "headquarters": Relation("org", "city", r"is headquartered in ([^.]+)\.", "headquartered"),
    "industry": Relation("org", None, r"is an organisation in the (.+?) industry", "industry"),
    "river_country": Relation("river", "country", r"rises in ([^.]+?) and runs", "rises"),
}

SINGLE_TEMPLATES: dict[str, str] = {
    "birth_year": "In what year was {s} born?",
    "birthplace": "In which city was {s} born?",
    "occupation": "What was the occupation of {s}?",
    "employer": "Which organisation did {s} work for?",
    "mentor": "Under whom did {s} train?",
    "country": "In which country is the city of {s}?",
    "city_founded": "In what year was the city of {s} founded?",
    "river": "Which river flows through {s}?",
    "capital": "What is the capital of {s}?",
    "currency": "What is the currency of {s}?",
    "language": "What is the official language of {s}?",
    "org_founded": "In what year was the {s} founded?",
    "founder": "Who founded the {s}?",
    "headquarters": "In which city is the {s} headquartered?",
    "industry": "In which industry does the {s} operate?",
    "river_country": "In which country does the {s} rise?",
}

MULTIHOP_TEMPLATES: dict[tuple[str, str], str] = {
    ("birthplace", "country"): "In which country is the city where {s} was born?",
    ("birthplace", "river"): "Which river flows through the city where {s} was born?",
    ("birthplace", "city_founded"): "In what year was the birthplace of {s} founded?",
    ("employer", "headquarters"): "In which city is the organisation that {s} worked for headquartered?",
    ("employer", "founder"): "Who founded the organisation that {s} worked for?",
    ("employer", "org_founded"): "In what year was the employer of {s} founded?",
    ("employer", "industry"): "In which industry does the employer of {s} operate?",
    ("mentor", "birthplace"): "In which city was the mentor of {s} born?",
    ("mentor", "occupation"): "What was the occupation of the person under whom {s} trained?",
    ("mentor", "birth_year"): "In what year was the mentor of {s} born?",
    ("founder", "birthplace"): "In which city was the founder of the {s} born?",
    ("founder", "birth_year"): "In what year was the founder of the {s} born?",
    ("founder", "occupation"): "What was the occupation of the founder of the {s}?",
    ("headquarters", "country"): "In which country is the {s} headquartered?",
    ("headquarters", "river"): "Which river flows through the city where the {s} is headquartered?",
    ("country", "capital"): "What is the capital of the country in which {s} lies?",
    ("country", "currency"): "What is the currency of the country in which {s} lies?",
    ("country", "language"): "What is the official language of the country in which {s} lies?",
    ("capital", "city_founded"): "In what year was the capital of {s} founded?",
    ("capital", "river"): "Which river flows through the capital of {s}?",
    ("river", "river_country"): "In which country does the river that flows through {s} rise?",
}

_ONSETS = "b br c d dr f g gr h j k kr l m n p qu r s sk st t th tr v vr w z".split()
_VOWELS = "a e i o u ae ai ei ou y".split()
_CODAS = ["", "", "", "n", "r", "l", "s", "th", "m", "x", "nd", "rk"]
_OCCUPATIONS = (
    "cartographer glassblower astronomer clockmaker bookbinder botanist engraver shipwright apothecary "
    "lexicographer stonemason cooper archivist tanner luthier surveyor chandler weaver cryptographer "
    "beekeeper typesetter perfumer falconer locksmith mapmaker ropemaker vintner geologist organist tutor"
).split()
_INDUSTRIES = [
    "shipbuilding", "printing", "banking", "textiles", "glassmaking", "brewing", "clockmaking", "mining",
    "pharmacy", "publishing", "insurance", "shipping", "tea trading", "salt harvesting", "lamp oil", "dyeing",
]
_ORG_KINDS = ["Guild", "Company", "Society", "Trust", "Consortium", "Collective", "Works", "House", "League"]
_SUBJECTS = ["arithmetic", "music", "rhetoric", "drawing", "chemistry", "navigation", "poetry", "geometry"]
_CITY_TRAITS = ["lantern festival", "covered bridges", "salt markets", "clock towers", "terraced gardens",
                "copper roofs", "winter fairs", "stone quays", "glass arcades", "old observatory"]


class _Names:
    """Invented words, each used at most once in the whole corpus (so every name is unambiguous)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        while True:
            w = "".join(
                self.rng.choice(_ONSETS) + self.rng.choice(_VOWELS) + self.rng.choice(_CODAS)
                for _ in range(syllables)
            )
            if len(w) >= 4 and w not in self.used:
                self.used.add(w)
                return w.capitalize()


def _generate_entities(rng: random.Random, n_people: int, n_cities: int, n_countries: int, n_orgs: int,
                       n_rivers: int) -> dict[str, list[dict[str, Any]]]:
    names = _Names(rng)
    given = [names.word(2) for _ in range(150)]  # shared first names make person queries less trivial
    countries = [
        {"name": names.word(2) + rng.choice(["ia", "land", "mark", "ora", "esh"]),
         "currency": names.word(1).lower() if rng.random() < 0.3 else names.word(2).lower(),
         "language": names.word(2) + rng.choice(["ese", "ic", "ish", "an"])}
        for _ in range(n_countries)
    ]
    rivers = [{"name": names.word(rng.choice([2, 3])) + " River", "river_country": rng.choice(countries)["name"],
               "length": rng.randrange(40, 2400)} for _ in range(n_rivers)]
    cities = []
    for i in range(n_cities):
        country = countries[i] if i < n_countries else rng.choice(countries)  # every country has a city
        suffix = rng.choice(["", "", "holt", "mere", "vik", "burg", "ford", "wick"])
        cities.append({"name": names.word(2) + suffix, "country": country["name"],
                       "city_founded": rng.randrange(1020, 1860), "river": rng.choice(rivers)["name"],
                       "trait": rng.choice(_CITY_TRAITS)})
        if i < n_countries:
            country["capital"] = cities[-1]["name"]
    people = [
        {"name": f"{rng.choice(given)} {names.word(rng.choice([2, 3]))}", "birth_year": rng.randrange(1600, 1960),
         "birthplace": rng.choice(cities)["name"], "occupation": rng.choice(_OCCUPATIONS),
         "pronoun": rng.choice(["She", "He"]), "siblings": rng.randrange(1, 9), "subject": rng.choice(_SUBJECTS)}
        for _ in range(n_people)
    ]
    people.sort(key=lambda p: p["birth_year"])
    for i, p in enumerate(people):
        if i >= 10:  # mentors are strictly earlier in birth order; the ten eldest have none
            p["mentor"] = people[rng.randrange(0, i - 5)]["name"]
    orgs = []
    for _ in range(n_orgs):
        founder = rng.choice(people)
        orgs.append({"name": f"{names.word(2)} {rng.choice(_ORG_KINDS)}", "founder": founder["name"],
                     "org_founded": founder["birth_year"] + rng.randrange(22, 60),
                     "headquarters": rng.choice(cities)["name"], "industry": rng.choice(_INDUSTRIES),
                     "members": rng.randrange(12, 4000)})
    for p in people:
        p["employer"] = rng.choice(orgs)["name"]
    return {"person": people, "city": cities, "country": countries, "org": orgs, "river": rivers}


def _passages(ent: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str]]:
    """(title, text) pairs. Persons get two passages (early life, career), like chunked encyclopedia articles."""
    out: list[tuple[str, str]] = []
    for p in ent["person"]:
        first, pr = p["name"].split()[0], p["pronoun"]
        out.append((p["name"], f"{p['name']} was born in {p['birth_year']} in the city of {p['birthplace']}. "
                    f"{pr} grew up with {p['siblings']} siblings and showed an early talent for {p['subject']}. "
                    f"As a youth, {first} kept detailed notebooks that survive to this day."))
        mentor = f" {pr} trained under {p['mentor']}." if "mentor" in p else ""
        out.append((p["name"], f"{p['name']} worked as a{'n' if p['occupation'][0] in 'aeiou' else ''} "
                    f"{p['occupation']} for the {p['employer']}.{mentor} "
                    f"{pr} is remembered for work in {p['subject']} and for letters to colleagues."))
    for c in ent["city"]:
        out.append((c["name"], f"{c['name']} is a city in {c['country']}. The city was founded in {c['city_founded']}. "
                    f"The {c['river']} flows through {c['name']}. Visitors know it for its {c['trait']}."))
    for k in ent["country"]:
        out.append((k["name"], f"{k['name']} is a country whose capital is {k['capital']}. "
                    f"Its currency is the {k['currency']}. The official language of {k['name']} is {k['language']}."))
    for o in ent["org"]:
        out.append((o["name"], f"The {o['name']} is an organisation in the {o['industry']} industry. "
                    f"It was founded in {o['org_founded']} by {o['founder']}. The {o['name']} is headquartered in "
                    f"{o['headquarters']}. It had {o['members']} members at its height."))
    for r in ent["river"]:
        out.append((r["name"], f"The {r['name']} rises in {r['river_country']} and runs for {r['length']} kilometres "
                    "before reaching the sea."))
    return out


def _golds(value: Any) -> list[str]:
    """Accepted answers: the value itself; a river also without the word "River"."""
    value = str(value)
    return [value, value[: -len(" River")]] if value.endswith(" River") else [value]


def _questions(ent: dict[str, list[dict[str, Any]]], rng: random.Random) -> dict[tuple[str, str], list[dict]]:
    by_name = {e["name"]: e for es in ent.values() for e in es}
    test_names: set[str] = set()
    for es in ent.values():
        names = [e["name"] for e in es]
        rng.shuffle(names)
        test_names.update(names[: max(1, round(TEST_ENTITY_FRACTION * len(names)))])
    pools: dict[tuple[str, str], dict[str, list[dict]]] = {(s, sp): {} for s in DATA_SOURCES for sp in SPLITS}

    def add(source: str, key: str, subject: dict, relations: list[str], question: str, answer: Any) -> None:
        if str(answer) in question or str(answer) == subject["name"]:
            return  # degenerate (e.g. a city that is its own country's capital)
        split = "test" if subject["name"] in test_names else "train"
        pools[(source, split)].setdefault(key, []).append({
            "question": question, "golden_answers": _golds(answer), "data_source": source,
            "metadata": {"subject": subject["name"], "relations": relations},
        })

    for rel, template in SINGLE_TEMPLATES.items():
        for e in ent[RELATIONS[rel].subject]:
            if rel in e:
                add("fict-single", rel, e, [rel], template.format(s=e["name"]), e[rel])
    for (r1, r2), template in MULTIHOP_TEMPLATES.items():
        for e in ent[RELATIONS[r1].subject]:
            if r1 in e and r2 in by_name[e[r1]]:
                add("fict-multihop", f"{r1}>{r2}", e, [r1, r2], template.format(s=e["name"]), by_name[e[r1]][r2])
    out: dict[tuple[str, str], list[dict]] = {}
    for (source, split), by_rel in pools.items():
        lists = [by_rel[k] for k in sorted(by_rel)]
        for lst in lists:
            rng.shuffle(lst)
        mixed = [q for row in _round_robin(lists) for q in row]  # balanced relation mix before the cap
        mixed = mixed[: MAX_QUESTIONS[split]]
        for i, q in enumerate(mixed):
            q["id"] = f"{source}-{split}-{i}"
        out[(source, split)] = mixed
    return out


def _round_robin(lists: list[list[dict]]) -> list[list[dict]]:
    depth = max((len(x) for x in lists), default=0)
    return [[x[i] for x in lists if i < len(x)] for i in range(depth)]


def generate(seed: int = 0, *, n_people: int = 900, n_cities: int = 320, n_countries: int = 40, n_orgs: int = 300,
             n_rivers: int = 80) -> tuple[list[dict], dict[tuple[str, str], list[dict]]]:
    """Build (passages, questions) deterministically from ``seed``; nothing is written.

    Passages are ``{"id", "contents": '"Title"\\ntext'}`` (Search-R1 / wiki-18 layout). Questions are keyed by
    (data_source, split) and hold ``id, question, golden_answers, data_source, metadata`` where ``metadata`` is
    ``{"subject": name, "relations": [r1(, r2)]}`` (the hop plan the oracle follows). Train and test questions
    have disjoint *subject* entities (20% of each entity type is held out); intermediate hops may be shared.
    """
    rng = random.Random(seed)
    ent = _generate_entities(rng, n_people, n_cities, n_countries, n_orgs, n_rivers)
    passages = [{"id": str(i), "contents": f'"{title}"\n{text}'} for i, (title, text) in enumerate(_passages(ent))]
    return passages, _questions(ent, rng)


@dataclass(frozen=True)
class FictionalDataset:
    """Paths of a built fictional dataset."""

    root: Path

    @property
    def corpus_file(self) -> Path:
        return self.root / "corpus.jsonl"

    def questions_file(self, source: str, split: str) -> Path:
        if source not in DATA_SOURCES or split not in SPLITS:
            raise ValueError(f"unknown source/split {source!r}/{split!r}; sources: {DATA_SOURCES}, splits: {SPLITS}")
        return self.root / f"{source}.{split}.jsonl"


def default_cache_dir() -> Path:
    """``~/.cache/gigpo/search``."""
    return Path.home() / ".cache" / "gigpo" / "search"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _atomic_write(path: Path, write: Callable[[Any], None]) -> None:
    """Write via a temp file in the same directory + ``os.replace``: readers never see a partial file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    _atomic_write(path, lambda f: f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def _is_valid(ds: FictionalDataset, seed: int) -> bool:
    try:
        manifest = json.loads((ds.root / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("version") != CORPUS_VERSION or manifest.get("seed") != seed:
            return False
        files = manifest["files"]
        expected = {ds.corpus_file.name} | {ds.questions_file(s, sp).name for s in DATA_SOURCES for sp in SPLITS}
        return set(files) == expected and all(_sha256(ds.root / n) == h for n, h in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


_BUILT: dict[Path, tuple[tuple[int, int], ...]] = {}


def _signature(ds: FictionalDataset) -> tuple[tuple[int, int], ...]:
    """(size, mtime_ns) of every file: a cheap check that nothing changed since the last full verification."""
    names = [ds.corpus_file, ds.root / "manifest.json"]
    names += [ds.questions_file(s, sp) for s in DATA_SOURCES for sp in SPLITS]
    try:
        return tuple((st.st_size, st.st_mtime_ns) for st in (p.stat() for p in names))
    except OSError:
        return ()


def build_fictional(cache_dir: str | os.PathLike | None = None, seed: int = 0, *, rebuild: bool = False) -> FictionalDataset:
    """Return the fictional dataset for ``seed`` under ``cache_dir`` (default ``~/.cache/gigpo/search``).

    Files live in ``<cache_dir>/fict-v<version>-seed<seed>/``: ``corpus.jsonl``, ``<source>.<split>.jsonl`` and a
    ``manifest.json`` with each file's SHA-256, written last. A directory whose manifest is missing, stale or does
    not match the files (a crash mid-write, a truncated file) is regenerated. Every file is written atomically,
    so concurrent builders (several trainer processes) are safe: they write identical bytes. After one full
    check a process only re-stats the files (size, mtime), so creating many envs hashes them once.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    ds = FictionalDataset((root / f"fict-v{CORPUS_VERSION}-seed{seed}").resolve())
    if not rebuild and ds.root in _BUILT and _BUILT[ds.root] == _signature(ds):
        return ds
    if rebuild or not _is_valid(ds, seed):
        ds.root.mkdir(parents=True, exist_ok=True)
        passages, questions = generate(seed)
        _write_jsonl(ds.corpus_file, passages)
        for (source, split), rows in questions.items():
            _write_jsonl(ds.questions_file(source, split), rows)
        files = {ds.corpus_file.name: _sha256(ds.corpus_file)}
        files.update({ds.questions_file(s, sp).name: _sha256(ds.questions_file(s, sp)) for s, sp in questions})
        manifest = {"version": CORPUS_VERSION, "seed": seed, "files": files}
        _atomic_write(ds.root / "manifest.json", lambda f: json.dump(manifest, f, indent=1))
    _BUILT[ds.root] = _signature(ds)
    return ds


def extract_attribute(relation: str, text: str) -> str | None:
    """Read ``relation``'s value from a passage of the subject entity (None when the passage does not state it)."""
    m = re.search(RELATIONS[relation].pattern, text)
    return m.group(1).strip() if m else None
