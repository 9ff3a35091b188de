"""The frame protocol's codec (strata_client.frame) against the Go tree's
golden frames (proto/frame/testdata/golden): every golden frame decodes to
its fields and its fields encode to it, byte for byte, at the connection
version it is laid out for; the malformed frames are refused; the raw
plane's fixed-layout helpers produce the golden bytes; and the codec's
table, the ops' versions, the statuses and the error codes
(errors.REASONS) are those of proto/frame/SPEC.md, the table the Go codec
and client are checked against too. A frame error and a gRPC error of the
same reason raise the same exception."""

import glob
import json
import os
import re
import unittest

import _support  # noqa: F401 (puts python/ on sys.path)
from strata_client import errors as E
from strata_client import frame as F
from strata_client import raw as R

_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto", "frame")
_BYTES = (F.KEY, F.BYTES8, F.BYTES32, F.DATA)


def _goldens():
    out = []
    for path in sorted(glob.glob(os.path.join(_ROOT, "testdata", "golden", "*.json"))):
        with open(path) as f:
            out.append(json.load(f))
    return out


def _version(g):
    """The connection version a golden frame is laid out for."""
    return g.get("conn_version", F.NEWEST_VERSION)


def _to_json(t, v, version):
    """A decoded value as the golden files write it (bytes as hex)."""
    if isinstance(t, list):
        t = F.fields_at(t, version)
        return {name: _to_json(ft, v[name], version) for name, ft in t if name in v} | (
            {"size": v["size"]} if "size" in v and not any(n == "size" for n, _ in t) else {})
    if isinstance(t, tuple):
        return [_to_json(t[1], e, version) for e in v]
    return v.hex() if t in _BYTES else v


def _from_json(t, v, version):
    """A golden file's value as the codec takes it (hex as bytes)."""
    if isinstance(t, list):
        return {name: _from_json(ft, v[name], version) for name, ft in F.fields_at(t, version)}
    if isinstance(t, tuple):
        return [_from_json(t[1], e, version) for e in v]
    return bytes.fromhex(v) if t in _BYTES else v


def _pb_field(num, value):
    """One length-delimited protobuf field (tag and value < 128 bytes long)."""
    return bytes((num << 3 | 2, len(value))) + value


class _RpcError(Exception):
    """A gRPC error as a node sends one: a status code, and a
    google.rpc.Status with a strata ErrorInfo of reason in its trailers."""

    def __init__(self, reason, code="FAILED_PRECONDITION"):
        super().__init__(reason)
        self._code, self._reason = code, reason

    def code(self):
        return type("Code", (), {"name": self._code})()

    def details(self):
        return "refused"

    def trailing_metadata(self):
        info = _pb_field(1, self._reason.encode()) + _pb_field(2, E.ERROR_DOMAIN.encode())
        detail = _pb_field(1, b"type.googleapis.com/google.rpc.ErrorInfo") + _pb_field(2, info)
        return [("grpc-status-details-bin", _pb_field(2, b"refused") + _pb_field(3, detail))]


def _spec():
    with open(os.path.join(_ROOT, "SPEC.md")) as f:
        return f.read()


def _spec_tables():
    """SPEC.md's tables whose rows start with a number, by the heading or
    sentence that introduces them (as frame's golden_test.go reads them)."""
    out, title = {}, ""
    for line in _spec().split("\n"):
        if line.startswith("## "):
            title = line.lstrip("# ").lstrip("0123456789. ").strip()
        elif line and not line.startswith(("|", " ")) and line.endswith(":"):
            title = line[:-1].split(",")[0]
        elif re.match(r"^\|\s*\d+\s*\|", line):
            cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
            out.setdefault(title, []).append([c.strip(" `") for c in cells])
    return out


def _flat(fields, prefix=""):
    """A message's fields as the spec lists them: "name type" (and "since
    v" for a field of a later version than its message), a list as "name
    list" and a Put's page flattened."""
    out = []
    for f in fields:
        name, t = f[0], f[1]
        if isinstance(t, list) and t is not F.EXTENT:
            out += _flat(t)
        elif t is F.EXTENT:
            out.append("extent")
        elif isinstance(t, tuple):
            out.append(f"{name} list")
        else:
            out.append(f"{name} {t}" + (f" since {f[2]}" if len(f) > 2 else ""))
    return out


def _spec_fields(body):
    """The spec's body column as _flat writes it."""
    body = body.replace("\\|", "|")
    body = re.sub(r"\((one-way|the layout of Get)\)", "", body)
    out = []
    depth, part = 0, ""
    for ch in body + "|":
        if ch == "|" and depth == 0:
            part = part.strip()
            if part:
                m = re.match(r"^([a-z ]+): n × ", part)
                if m:
                    out.append(m.group(1).strip().replace(" ", "_") + " list")
                elif part == "extent":
                    out.append("extent")
                elif part == "data":
                    out.append("data data")
                else:
                    part, since = re.subn(r"\s*\(since (\d+)\)$", r"", part), re.search(r"\(since (\d+)\)$", part)
                    name, t = part[0].rsplit(" ", 1)
                    out.append(name.strip().replace(" ", "_") + " " + t.strip("`") + (f" since {since.group(1)}" if since else ""))
            part = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        part += ch
    return out


class GoldenFrameTest(unittest.TestCase):
    def test_goldens_decode_and_encode(self):
        goldens = _goldens()
        self.assertGreaterEqual(len(goldens), 19, "the golden frames are missing")
        self.assertEqual({g["op"] for g in goldens}, set(F.MESSAGES))
        self.assertIn(F.COST_HINT_VERSION - 1, {_version(g) for g in goldens}, "no golden frame of the layout before the cost hint")
        self.assertIn(F.EVENT_VERSION - 1, {_version(g) for g in goldens}, "no golden frame of the layout before the event info")
        for g in goldens:
            with self.subTest(g["name"]):
                b, v = bytes.fromhex(g["hex"]), _version(g)
                op, rid, fields = F.decode(b, v)
                name, schema = F.MESSAGES[op]
                self.assertEqual((op, rid, name), (g["op"], g["id"], g["message"]))
                self.assertEqual(_to_json(schema, fields, v), g["fields"])
                self.assertEqual(F.encode(op, rid, _from_json(schema, g["fields"], v), v), b)
                self.assertEqual(F.encode(op, rid, fields, v), b)

    def test_malformed(self):
        with open(os.path.join(_ROOT, "testdata", "malformed.jsonl")) as f:
            cases = [json.loads(line) for line in f if line.strip()]
        self.assertGreater(len(cases), 5)
        for c in cases:
            with self.subTest(c["name"]):
                with self.assertRaises(E.ProtocolError):
                    F.decode(bytes.fromhex(c["hex"]))

    def test_hot_path_helpers(self):
        """raw.py's fixed-layout encoders write the golden bytes, at each
        connection version they are laid out for."""
        by = {g["name"]: g for g in _goldens()}

        def spec(p, size):
            return R.PutSpec(p["key"], p["parent"] if p["has_parent"] else None, p["depth"], size, p["chain_depth"],
                             p.get("cost_hint", 0.0), p.get("tokens", ()), p.get("lora_name", ""), p.get("extra_keys", b""))

        def reserve(f, v):
            return R.reserve_body(f["ns"], [spec(p, p["size"]) for p in f["pages"]], f["ttl_ms"], v)

        def put(f, v):
            return R.put_head(f["ns"], spec(f["page"], 0), f["checksum"], f["ttl_ms"], v) + f["data"]

        for name, body in [
            ("read", lambda f, v: F.read_body(f["ns"], f["lease"], f["keys"])),
            ("read_lease", lambda f, v: F.read_body(f["ns"], f["lease"], f["keys"])),
            ("hello", lambda f, v: R.hello_body(f["token"], f["version"])),
            ("lookup_lease", lambda f, v: R.lookup_body(f["ns"], f["keys"], f["lease"], f["lease_ttl_ms"])),
            ("reserve", reserve),
            ("reserve_v4", reserve),
            ("reserve_v5", reserve),
            ("commit", lambda f, v: R.commit_body(f["ns"], [(i["write_id"], i["size"], i["checksum"]) for i in f["items"]])),
            ("put", put),
            ("put_v4", put),
            ("put_v5", put),
            ("put_root", put),
            ("write", lambda f, v: f["ns"] + F.WRITE_HEAD.pack(f["write_id"], f["offset"]) + f["data"]),
            ("page_found", lambda f, v: F.PAGE_HEAD.pack(f["index"], 1, len(f["checksum"])) + f["checksum"] + f["data"]),
        ]:
            with self.subTest(name):
                g = by[name]
                _, schema = F.MESSAGES[g["op"]]
                want, v = bytes.fromhex(g["hex"]), _version(g)
                self.assertEqual(R.frame(g["op"], g["id"], body(_from_json(schema, g["fields"], v), v)), want)
        self.assertEqual(R.hello_body("t"), R.hello_body("t", F.NEWEST_VERSION), "the client does not say hello with the newest version")

    def test_error_codes(self):
        """Each Error golden maps to the exception of its code's reason; the
        code names are those the Go side wrote, and the spec's."""
        spec = {int(r[0]): (r[1], r[2]) for r in _spec_tables()["Error codes"]}
        self.assertEqual({c: v for c, v in E.FRAME_CODES.items()}, spec)
        errors = [g for g in _goldens() if g["op"] == F.OP_ERROR]
        self.assertEqual({g["fields"]["code"] for g in errors} - {999}, set(spec))
        for g in errors:
            with self.subTest(g["name"]):
                code = g["fields"]["code"]
                err = R.error_from_frame("get", bytes.fromhex(g["hex"])[F.HEADER_SIZE:], "n1")
                name, reason = spec.get(code, (f"code {code}", "INTERNAL"))
                self.assertEqual(g.get("code_name", f"code {code}"), name)
                self.assertEqual((err.code, err.reason), (name, reason))
                self.assertIs(type(err), E._BY_REASON.get(reason, E.StrataError))
        # The issue this table fixed: INTERNAL is the node's failure of the
        # request, not the node being unavailable.
        internal = E.from_frame("get", 1, "boom")
        self.assertIsInstance(internal, E.InternalError)
        self.assertNotIsInstance(internal, E.UnavailableError)
        self.assertIsInstance(E.from_frame("get", 999, "future"), E.InternalError)
        self.assertIsInstance(E.from_frame("get", E.FRAME_CODE_OF["SHUTTING_DOWN"], "closing"), E.UnavailableError)

    def test_one_error_table(self):
        """A refusal raises the same exception whichever wire brought it:
        for every code of the spec, the Error frame and a gRPC error whose
        ErrorInfo carries the code's reason, whatever its status code."""
        for code, (name, reason) in E.FRAME_CODES.items():
            via_frame = E.from_frame("put", code, "refused", "n1")
            for status in ("NOT_FOUND", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION"):
                with self.subTest(name, status=status):
                    via_rpc = E.from_rpc("put", _RpcError(reason, status), "n1")
                    self.assertIs(type(via_rpc), type(via_frame))
                    self.assertEqual((via_frame.reason, via_rpc.reason), (reason, reason))

    def test_spec_tables(self):
        t = _spec_tables()
        ops = {int(r[0]): (r[1], int(r[3]), r[4]) for r in t["Ops"]}
        self.assertEqual(set(ops), set(F.MESSAGES))
        self.assertEqual(set(F.SINCE), set(F.MESSAGES))
        for op, (name, fields) in F.MESSAGES.items():
            with self.subTest(name):
                self.assertEqual(ops[op][0], name)
                self.assertEqual(ops[op][1], F.SINCE[op])
                self.assertEqual(_spec_fields(ops[op][2]), _flat(fields))
        self.assertEqual({r[1]: int(r[0]) for r in t["Page status"]}, F.PAGE_STATUS)
        self.assertEqual({r[1]: int(r[0]) for r in t["Reserve status"]}, F.RESERVE_STATUS)
        self.assertEqual({r[1]: int(r[0]) for r in t["Commit status"]}, F.COMMIT_STATUS)
        self.assertEqual([int(r[0]) for r in t["Versions"]], list(range(F.MIN_PROTOCOL_VERSION, F.NEWEST_VERSION + 1)))


if __name__ == "__main__":
    unittest.main()
