"""Parses a Prometheus textfile with prometheus-client's own parser (an implementation independent of cloudsync's
writer) and prints each sample as `name{label=value,...} value`, sorted, so a test can compare what it means."""
import sys

from prometheus_client.parser import text_string_to_metric_families

text = open(sys.argv[1], encoding="utf-8").read()
lines = []
for family in text_string_to_metric_families(text):
    if family.type != "gauge" or not family.documentation:
        sys.exit(f"FAIL {family.name}: expected a documented gauge, got {family.type}")
    for sample in family.samples:
        labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
        lines.append(f"{sample.name}{{{labels}}} {sample.value:g}")
print("\n".join(sorted(lines)))
