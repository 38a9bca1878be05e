"""The listing commands of the ``jaxpriv`` command line: ``relations`` (every relation, a claim
with parameters once) and ``notions`` (every notion, what the engines use of it)."""

from __future__ import annotations

import json


# -- relations ---------------------------------------------------------------------------------


def _relations(args) -> int:
    """Every relation; a claim with parameters once, with its parameters and the values the
    audit takes (``--json``: one row per registered instance, with its claim and values)."""
    from jaxpriv import registry

    def claim_fields(r):
        claim = registry.CLAIMS.get(getattr(r, "claim", None) or "")
        if claim is None:
            return {"claim": None, "values": {}, "parameters": []}
        return {"claim": claim.id, "values": dict(r.values),
                "parameters": [{"name": p.name, "symbol": p.symbol, "flag": p.flag,
                                "audited_at": claim.audited_at(p)} for p in claim.parameters]}

    rows = [{"id": r.id, "kind": r.kind, "statement": r.statement,
             "sources": [str(s) for s in r.sources], "premise": r.premise,
             "conclusion": r.conclusion, "condition": r.condition,
             "certified": getattr(r, "certificate", None) is not None,
             "proof": getattr(r, "proof", ""), **claim_fields(r)}
            for r in registry.REGISTRY.values()]
    if args.json:
        print(json.dumps(rows))
        return 0
    shown, listed = set(), []
    for row in rows:  # a claim once, where its first instance is
        if row["claim"] is None:
            listed.append(row)
        elif row["claim"] not in shown:
            shown.add(row["claim"])
            claim = registry.CLAIMS[row["claim"]]
            listed.append({**row, "id": claim.id, "statement": claim.statement,
                           "condition": f"{row['condition']}; {claim.described()}"
                           if row["condition"] != "—" else claim.described()})
    width = max(len(row["id"]) for row in listed)
    for row in listed:
        print(f"{row['id']:<{width}} {row['statement']}")
        print(f"{'':<{width}} {'condition: ' if row['claim'] is None else ''}{row['condition']}; "
              f"sources: {', '.join(row['sources']) or '—'}")
    if shown:
        print(f"\n{len(shown)} claims with parameters: check one anywhere with its flags "
              "(jaxpriv check D6 FILE --alpha 3 --delta 1e-7) or an instance id (D6.a3.d1e-7)")
    return 0


def _notions(args) -> int:
    from jaxpriv import registry

    rows = [{"key": n.key, "doc": n.doc, "unit": n.unit, "source": str(n.source or ""),
             "params": {k: (None if v is registry.REQUIRED else v) for k, v in n.params.items()},
             "required": [k for k, v in n.params.items() if v is registry.REQUIRED],
             "needs_records": n.needs_records, "post_processing": n.post_processing,
             "screen": n.screen, "surrogate": n.surrogate is not None,
             "retract": n.retract is not None}
            for n in registry.NOTIONS.values()]
    if args.json:
        print(json.dumps(rows, default=str))
        return 0
    width = max(len(row["key"]) for row in rows)
    for row in rows:
        params = ", ".join(f"{k}={'required' if k in row['required'] else v!r}"
                           for k, v in row["params"].items())
        flags = [f for f, on in (("databases", row["needs_records"]),
                                 ("post-processing", row["post_processing"]),
                                 ("float32 screen", row["screen"]),
                                 ("surrogate", row["surrogate"]),
                                 ("retraction", row["retract"])) if on]
        print(f"{row['key']:<{width}} [{row['unit'] or '—'}] {row['doc']}"
              f"{' (' + params + ')' if params else ''}")
        if flags:
            print(f"{'':<{width}} {', '.join(flags)}")
    return 0
