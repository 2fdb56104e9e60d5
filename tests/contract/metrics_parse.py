"""Runs inside a contract environment: parses a /metrics text (stdin) with the release's own
prometheus_client and prints {family: [type, {sample name: total}]} as JSON."""

import json
import sys

from prometheus_client.parser import text_string_to_metric_families

out = {}
for fam in text_string_to_metric_families(sys.stdin.read()):
    totals = {}
    for s in fam.samples:
        totals[s.name] = totals.get(s.name, 0.0) + s.value
    out[fam.name] = [fam.type, totals]
print(json.dumps(out))
