#!/usr/bin/env python3
"""Reads `mvn dependency:tree -Dverbose` on stdin and lists every artifact for which
Maven's nearest-wins rule chose a lower version than the highest one in the graph.
Pulsar 5 is built with Gradle, whose resolution takes the highest version, so the
broker it ships runs with the highest ones: pom.xml pins them. With --pins, prints
<dependency> entries for pom.xml's dependencyManagement. Exit status 1 if any is lower."""
import re, sys
from collections import defaultdict

def key(v):
    return [int(x) if x.isdigit() else -1 for x in re.split(r'[.\-]', v)]

chosen, seen = {}, defaultdict(set)
pattern = re.compile(r'[-\\] \(?([\w.\-]+):([\w.\-]+):(jar|pom|test-jar):(?:([\w.\-]+):)?([\w.\-]+):(compile|runtime|provided|test|system)(.*)')
for line in sys.stdin:
    m = pattern.search(line)
    if not m:
        continue
    g, a, _type, classifier, v, _scope, rest = m.groups()
    ga = (g, a, classifier or '')
    seen[ga].add(v)
    conflict = re.search(r'omitted for conflict with ([\w.\-]+)', rest)
    if conflict:
        chosen[ga] = conflict.group(1)
    elif 'omitted' not in rest:
        chosen[ga] = v
lower = 0
for (g, a, c), versions in sorted(seen.items()):
    highest = max(versions, key=key)
    if (g, a, c) in chosen and chosen[(g, a, c)] != highest:
        lower += 1
        if '--pins' in sys.argv:
            cl = f"<classifier>{c}</classifier>" if c else ""
            print(f"      <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>{cl}<version>{highest}</version></dependency>")
        else:
            print(f"{g}:{a}{':' + c if c else ''}: Maven chose {chosen[(g, a, c)]}, the graph's highest is {highest}")
sys.exit(1 if lower else 0)
