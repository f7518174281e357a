"""A strict reader of the Prometheus text exposition format, version 0.0.4.

Written from the format's description (prometheus.io, "Exposition formats"),
so the tests check `nightshift status --prometheus` and a server's /metrics
without depending on python3-prometheus-client (they use it too where it is
installed). Stricter than Prometheus where the format says "must" or "only":

- lines end with \\n, the text is UTF-8 and ends with a newline;
- `# HELP name text` (escapes \\\\ and \\n only) and `# TYPE name type` at most
  once per family, TYPE before the family's first sample; other `#` lines
  are comments; blank lines are ignored;
- metric names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*
  not starting with __, no label twice in a sample; label values escape only
  \\\\, \\" and \\n;
- a value is a Go float (digits, exponents, NaN, +Inf, -Inf), an optional
  timestamp an integer;
- a family's samples are one group (nothing of another family in between),
  no sample (name and label set) appears twice; a summary's samples are
  name{quantile=...}, name_sum, name_count; a histogram's name_bucket{le=...},
  name_sum, name_count.

parse(text) returns {family: Family}; a violation raises FormatError naming
the line. `python3 prometheus_text.py FILE` prints the families as JSON.
"""
import json
import math
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Inf|inf|NaN|nan)")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class FormatError(ValueError):
    pass


class Family:
    def __init__(self, name):
        self.name, self.type, self.help, self.samples = name, None, None, []

    def as_json(self):
        return {"type": self.type or "untyped", "help": self.help,
                "samples": [{"name": n, "labels": l, "value": v if math.isfinite(v) else str(v)}
                            for n, l, v in self.samples]}


def _unescape(text, allowed, where):
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text) or text[i + 1] not in allowed:
                raise FormatError(f"{where}: a backslash escapes only {' '.join(allowed)}")
            out.append({"\\": "\\", "n": "\n", '"': '"'}[text[i + 1]])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _labels(text, at, where):
    """Reads {a="x",b="y"} from text[at] == '{'; returns (labels, position after '}')."""
    labels, i = {}, at + 1
    while True:
        if i < len(text) and text[i] == "}":
            return labels, i + 1
        m = LABEL.match(text, i)
        if not m:
            raise FormatError(f"{where}: a label name is expected at column {i + 1}")
        name = m.group(0)
        if name.startswith("__"):
            raise FormatError(f"{where}: label names starting with __ are reserved ({name})")
        if name in labels:
            raise FormatError(f"{where}: label {name} twice")
        i = m.end()
        if text[i:i + 2] != '="':
            raise FormatError(f"{where}: label {name}: =\" expected")
        i += 2
        start = i
        while i < len(text) and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        if i >= len(text):
            raise FormatError(f"{where}: label {name}: unterminated value")
        labels[name] = _unescape(text[start:i], ("\\", '"', "n"), where)
        i += 1
        if i < len(text) and text[i] == ",":
            i += 1
        elif i >= len(text) or text[i] != "}":
            raise FormatError(f"{where}: , or }} expected after label {name}")


def _family_of(sample, families):
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample[:-len(suffix)] if sample.endswith(suffix) else None
        if base and base in families and families[base].type in ("summary", "histogram"):
            if suffix == "_bucket" and families[base].type != "histogram":
                continue
            return base
    return sample


def parse(text):
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # raises on invalid UTF-8
    if text and not text.endswith("\n"):
        raise FormatError("the text does not end with a newline")
    families, order, seen, current = {}, [], set(), None

    def family(name):
        if name not in families:
            families[name] = Family(name)
        return families[name]

    for n, line in enumerate(text.split("\n")[:-1], 1):
        where = f"line {n}"
        if "\r" in line:
            raise FormatError(f"{where}: a carriage return")
        if line.strip() == "":
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3) if line.startswith("# ") else []
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                name = parts[2]
                if not NAME.fullmatch(name):
                    raise FormatError(f"{where}: bad metric name {name!r}")
                f = family(name)
                if parts[1] == "HELP":
                    if f.help is not None:
                        raise FormatError(f"{where}: a second HELP for {name}")
                    f.help = _unescape(parts[3] if len(parts) > 3 else "", ("\\", "n"), where)
                else:
                    if f.type is not None:
                        raise FormatError(f"{where}: a second TYPE for {name}")
                    if f.samples:
                        raise FormatError(f"{where}: TYPE for {name} after its samples")
                    if len(parts) != 4 or parts[3] not in TYPES:
                        raise FormatError(f"{where}: TYPE {name}: one of {', '.join(TYPES)} expected")
                    f.type = parts[3]
            continue
        m = NAME.match(line)
        if not m:
            raise FormatError(f"{where}: a metric name is expected")
        sample, i, labels = m.group(0), m.end(), {}
        if i < len(line) and line[i] == "{":
            labels, i = _labels(line, i, where)
        rest = line[i:]
        if not rest.startswith(" "):
            raise FormatError(f"{where}: a space is expected before the value")
        fields = rest.split()
        if not 1 <= len(fields) <= 2 or not FLOAT.fullmatch(fields[0]):
            raise FormatError(f"{where}: a value (and an optional timestamp) is expected, not {rest.strip()!r}")
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise FormatError(f"{where}: the timestamp is not an integer")
        value = float(fields[0].replace("Inf", "inf"))
        name = _family_of(sample, families)
        f = family(name)
        if current != name:
            if name in order:
                raise FormatError(f"{where}: the samples of {name} are not one group")
            order.append(name)
            current = name
        key = (sample, tuple(sorted(labels.items())))
        if key in seen:
            raise FormatError(f"{where}: {sample} {labels} twice")
        seen.add(key)
        if f.type == "summary" and sample == name and "quantile" not in labels:
            raise FormatError(f"{where}: a summary's own sample needs a quantile label")
        if f.type == "histogram" and sample == name + "_bucket" and "le" not in labels:
            raise FormatError(f"{where}: a histogram bucket needs an le label")
        if f.type == "histogram" and sample == name:
            raise FormatError(f"{where}: a histogram has only _bucket, _sum and _count samples")
        f.samples.append((sample, labels, value))
    return families


if __name__ == "__main__":
    try:
        parsed = parse(open(sys.argv[1], "rb").read())
    except (FormatError, UnicodeDecodeError) as e:
        sys.exit(f"{sys.argv[1]}: {e}")
    json.dump({k: v.as_json() for k, v in parsed.items()}, sys.stdout, indent=1)
    print()
