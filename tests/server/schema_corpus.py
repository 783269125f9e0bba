"""The JSON-schema corpus of the structured-output tests: every distinct satisfiable
schema of the official JSON-Schema-Test-Suite (drafts 7, 6 and 4, Debian's
json-schema-test-suite) plus Pagoda's own: schemas shaped like the ones API clients send
(records with required and optional fields, nested objects and arrays, enums, consts,
formats, patterns, ranges, nullable fields, tuples, unions, $defs/$ref, maps), built from
a fixed seed so every run sends the same ones, each checked against its metaschema."""
from __future__ import annotations

import glob
import json
import pathlib
import random

SUITE = pathlib.Path("/usr/share/json-schema-test-suite/tests")


def suite_schemas() -> list[tuple[str, dict]]:
    """Every distinct schema of drafts 7, 6 and 4 that some instance satisfies."""
    seen: dict[str, tuple[str, dict]] = {}
    for draft in ("draft7", "draft6", "draft4"):
        for f in sorted(glob.glob(str(SUITE / draft / "*.json"))):
            for group in json.load(open(f)):
                if any(t["valid"] for t in group["tests"]):
                    key = json.dumps(group["schema"], sort_keys=True)
                    seen.setdefault(key, (f"{draft}/{pathlib.Path(f).stem}: {group['description']}", group["schema"]))
    return list(seen.values())


WORDS = ["id", "name", "title", "email", "age", "price", "count", "tags", "status", "created", "owner", "items",
         "city", "country", "score", "enabled", "notes", "kind", "version", "rating", "start", "end", "color", "unit"]


def leaf(rng: random.Random) -> dict:
    """A scalar schema of some type, with the keywords clients put on it."""
    k = rng.randrange(14)
    if k == 0:
        return {"type": "string"}
    if k == 1:
        lo = rng.randrange(0, 4)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randrange(1, 12)}
    if k == 2:
        return {"type": "string", "format": rng.choice(["date", "date-time", "email", "uuid", "time", "ipv4", "uri"])}
    if k == 3:
        return {"type": "string", "pattern": rng.choice(["^[A-Z]{2}[0-9]{3}$", "^[a-z]+(-[a-z]+)*$",
                                                         "^\\+?[0-9]{7,12}$", "^v[0-9]+\\.[0-9]+$"])}
    if k == 4:
        return {"enum": rng.sample(["red", "green", "blue", "low", "high", "open", "closed", "draft"], rng.randrange(2, 5))}
    if k == 5:
        return {"type": "integer"}
    if k == 6:
        lo = rng.randrange(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randrange(1, 500)}
    if k == 7:
        return {"type": "number", "minimum": 0, "exclusiveMaximum": rng.choice([1, 10, 1000])}
    if k == 8:
        return {"type": "boolean"}
    if k == 9:
        return {"type": ["string", "null"], "maxLength": 16}
    if k == 10:
        return {"const": rng.choice(["v1", 42, True, "fixed"])}
    if k == 11:
        return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "string", "maxLength": 5}]}
    if k == 12:
        return {"type": "integer", "multipleOf": rng.choice([2, 5, 10]), "minimum": 0, "maximum": 1000}
    return {"type": "number"}


def node(rng: random.Random, depth: int) -> dict:
    k = rng.randrange(10) if depth < 2 else 0
    if k <= 3:
        return leaf(rng)
    if k <= 6:
        return record(rng, depth + 1)
    if k == 7:
        lo = rng.randrange(0, 3)
        return {"type": "array", "items": node(rng, depth + 1), "minItems": lo, "maxItems": lo + rng.randrange(1, 4)}
    if k == 8:
        return {"type": "array", "prefixItems": [leaf(rng), leaf(rng)], "items": False}
    return {"type": "object", "additionalProperties": leaf(rng), "maxProperties": 3}


def record(rng: random.Random, depth: int = 0) -> dict:
    names = rng.sample(WORDS, rng.randrange(1, 6))
    props = {n: node(rng, depth) for n in names}
    schema = {"type": "object", "properties": props,
              "required": [n for n in names if rng.random() < 0.7]}
    if rng.random() < 0.6:
        schema["additionalProperties"] = False
    if rng.random() < 0.2:
        schema["description"] = "a record"
    return schema


def own_schemas(count: int = 100, seed: int = 18) -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        shape = i % 5
        if shape == 0:
            s = record(rng)
        elif shape == 1:
            s = {"type": "array", "items": record(rng, 1), "minItems": 1, "maxItems": rng.randrange(1, 4)}
        elif shape == 2:
            s = {"$defs": {"item": record(rng, 1)}, "type": "object",
                 "properties": {"first": {"$ref": "#/$defs/item"},
                                "rest": {"type": "array", "items": {"$ref": "#/$defs/item"}, "maxItems": 2}},
                 "required": ["first"], "additionalProperties": False}
        elif shape == 3:
            s = {"oneOf": [{"type": "object", "properties": {"kind": {"const": "a"}, "a": leaf(rng)},
                            "required": ["kind", "a"], "additionalProperties": False},
                           {"type": "object", "properties": {"kind": {"const": "b"}, "b": leaf(rng)},
                            "required": ["kind", "b"], "additionalProperties": False}]}
        else:
            s = node(rng, 0)
        s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        out.append((f"own/{i}", s))
    return out


def corpus() -> list[tuple[str, dict]]:
    return suite_schemas() + own_schemas()
