"""A helm post-renderer that removes one verb on one resource from the operator's RBAC rules.

``python drop_rule.py RESOURCE VERB`` reads the rendered manifests on stdin and writes them back
without that permission (in every Role and ClusterRole of the operator; the client role is left
alone). Used by test_rbac.py to show that a missing rule fails loudly.
"""

from __future__ import annotations

import sys

import yaml


def drop(docs: list[dict], resource: str, verb: str) -> int:
    removed = 0
    for doc in docs:
        if doc.get("kind") not in ("Role", "ClusterRole") or doc["metadata"]["name"].endswith("-client"):
            continue
        rules = []
        for rule in doc.get("rules") or []:
            if resource in rule.get("resources", []) and verb in rule.get("verbs", []):
                removed += 1
                others = [r for r in rule["resources"] if r != resource]
                if others:
                    rules.append({**rule, "resources": others})
                verbs = [v for v in rule["verbs"] if v != verb]
                if verbs:
                    rules.append({**rule, "resources": [resource], "verbs": verbs})
            else:
                rules.append(rule)
        doc["rules"] = rules
    return removed


def main() -> None:
    resource, verb = sys.argv[1:3]
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    if not drop(docs, resource, verb):
        sys.exit(f"drop_rule: no rule grants {verb} on {resource}")
    yaml.safe_dump_all(docs, sys.stdout, sort_keys=False)


if __name__ == "__main__":
    main()
