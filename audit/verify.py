#!/usr/bin/env python3
"""Independent verifier for fsgate audit logs, written from audit/FORMAT.md.

Usage: verify.py [--json] [--pubkey KEY] [--checkpoint FILE]... [--trusted STATE] FILE|DIR...

Exit codes: 0 intact, 1 tampered, 2 unreadable (or bad arguments).
Needs only the Python 3 standard library, plus the `cryptography` package when a
signature has to be checked.
"""

import argparse
import hashlib
import json
import os
import re
import sys
import time

GENESIS = "0" * 64
TS_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
HEX64 = re.compile(r"[0-9a-f]{64}")
HEX32 = re.compile(r"[0-9a-f]{32}")
U64_MAX = 2**64 - 1
I64_MIN = -(2**63)
MAX_DEPTH = 32

# Section 2: the record fields, in order, with their types.
FIELDS = [
    ("seq", "u64"), ("ts", "str"), ("log", "str"), ("kind", "str"), ("session", "str"),
    ("transport", "str"), ("peer", "str"), ("op", "str"), ("path", "str"),
    ("path2", "str"), ("args", "obj"), ("decision", "str"), ("rule", "str"),
    ("reason", "str"), ("outcome", "str"), ("bytes", "u64"), ("sha256", "str"),
    ("backup", "str"), ("policy_sha256", "str"), ("duration_us", "u64"),
    ("details", "obj"), ("prev", "str"), ("hash", "str"),
]
FIELD_NAMES = {name for name, _ in FIELDS}
REQUIRED = {"seq", "ts", "kind", "prev", "hash"}
CHECKPOINT_NAMES = {"type", "v", "log", "seq", "hash", "ts", "kind", "key", "sig"}
TOMBSTONE_NAMES = {"type", "v", "log", "first_seq", "last_seq", "last_hash", "ts",
                   "before", "files", "key", "sig"}
# Rust's str::trim / char::is_whitespace (Unicode White_Space).
WHITESPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(
    chr(c) for c in range(0x2000, 0x200B)) + "\u2028\u2029\u202f\u205f\u3000"


class NotCanonical(Exception):
    pass


# ---- Section 3: canonical encoding ----------------------------------------------------

SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
         "\r": "\\r"}


def enc_str(s):
    out = ['"']
    for ch in s:
        if ch in SHORT:
            out.append(SHORT[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def enc_value(v, depth):
    if depth > MAX_DEPTH:
        raise NotCanonical("nested too deeply")
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if type(v) is int:
        if not I64_MIN <= v <= U64_MAX:
            raise NotCanonical("integer out of range")
        return str(v)
    if type(v) is str:
        return enc_str(v)
    if type(v) is list:
        return "[" + ",".join(enc_value(x, depth + 1) for x in v) + "]"
    if type(v) is dict:
        items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-8"))
        return "{" + ",".join(enc_str(k) + ":" + enc_value(x, depth + 1) for k, x in items) + "}"
    raise NotCanonical("not an integer (floats are not canonical)")


def enc_sidecar(obj):
    """Checkpoints and tombstones: sorted names, values as in section 3 (no depth limit
    in practice: their values are flat)."""
    return enc_value(obj, 0).encode("utf-8")


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise NotCanonical("repeated name")
        d[k] = v
    return d


# ---- Section 2-4: one record line -------------------------------------------------------

class Info:
    __slots__ = ("seq", "prev", "hash", "ts", "log", "kind", "rec")


def check_line(line):
    """Returns ("ok", Info) | ("malformed", message) | ("modified", seq)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        return "malformed", "not UTF-8"
    try:
        rec = json.loads(text, object_pairs_hook=no_duplicates)
    except (ValueError, NotCanonical, RecursionError) as e:
        return "malformed", "not JSON: %s" % e
    if type(rec) is not dict:
        return "malformed", "not an object"
    if not set(rec) <= FIELD_NAMES or not REQUIRED <= set(rec):
        return "malformed", "unknown or missing field"
    parts = []
    try:
        for name, ty in FIELDS:
            if name not in rec:
                continue
            v = rec[name]
            if ty == "u64":
                if type(v) is not int or not 0 <= v <= U64_MAX:
                    return "malformed", "%s is not a u64" % name
                parts.append('"%s":%d' % (name, v))
            elif ty == "str":
                if type(v) is not str:
                    return "malformed", "%s is not a string" % name
                parts.append('"%s":%s' % (name, enc_str(v)))
            else:
                if type(v) is not dict:
                    return "malformed", "%s is not an object" % name
                parts.append('"%s":%s' % (name, enc_value(v, 0)))
        canonical = ("{" + ",".join(parts) + "}").encode("utf-8")
    except (NotCanonical, UnicodeEncodeError) as e:
        return "malformed", "not canonical: %s" % e
    if canonical != line:
        return "malformed", "not in canonical form"
    if not TS_RE.fullmatch(rec["ts"]):
        return "malformed", "bad ts"
    if not HEX64.fullmatch(rec["prev"]) or not HEX64.fullmatch(rec["hash"]):
        return "malformed", "prev/hash not 64 hex digits"
    if "log" in rec and not HEX32.fullmatch(rec["log"]):
        return "malformed", "log not 32 hex digits"
    if rec["seq"] == 0:
        return "malformed", "seq 0"
    if rec["prev"] == GENESIS and (rec["seq"] != 1 or "log" not in rec):
        return "malformed", "genesis prev on a record that is not seq 1 with a log id"
    c = line[: line.rindex(b',"hash":')] + b"}"
    digest = hashlib.sha256(bytes.fromhex(rec["prev"]) + c).hexdigest()
    if digest != rec["hash"]:
        return "modified", rec["seq"]
    info = Info()
    info.seq, info.prev, info.hash, info.ts = rec["seq"], rec["prev"], rec["hash"], rec["ts"]
    info.log = rec.get("log")
    info.kind = rec["kind"] if rec["kind"] in ("break", "recovered") else None
    info.rec = rec
    return "ok", info


# ---- Sections 6-7: signed sidecar objects -----------------------------------------------

def load_public_key(arg):
    arg = arg.strip()
    if re.fullmatch(r"[0-9a-fA-F]{64}", arg):
        return bytes.fromhex(arg)
    with open(arg, "rb") as f:
        data = f.read()
    text = data.decode("utf-8", "replace").strip()
    if text.startswith("-----BEGIN"):
        from cryptography.hazmat.primitives import serialization
        key = serialization.load_pem_public_key(text.encode())
        return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return bytes.fromhex(text)


def ed25519_ok(key_raw, msg, sig_hex):
    try:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        raise SystemExit("verify.py: install the `cryptography` package to check signatures")
    if not re.fullmatch(r"[0-9a-f]{128}", sig_hex):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(key_raw).verify(bytes.fromhex(sig_hex), msg)
        return True
    except (InvalidSignature, ValueError):
        return False


def signature_status(obj, pinned):
    """("unsigned"|"pinned"|"unpinned"|"invalid", message)."""
    sig = obj.get("sig")
    key = obj.get("key")
    if type(sig) is not str:
        return ("invalid", "not signed, but a public key was given") if pinned else ("unsigned", "")
    if type(key) is not str:
        return "invalid", "signature without a key"
    if not HEX64.fullmatch(key):
        return "invalid", "the key it names is not an Ed25519 public key"
    named = bytes.fromhex(key)
    if pinned is not None and pinned != named:
        return "invalid", "signed by another key (%s)" % key
    unsigned = {k: v for k, v in obj.items() if k != "sig"}
    try:
        msg = enc_sidecar(unsigned)
    except NotCanonical:
        return "invalid", "cannot encode"
    if not ed25519_ok(named, msg, sig):
        return "invalid", "signature does not match"
    return ("pinned" if pinned is not None else "unpinned"), ""


def is_u64(v):
    return type(v) is int and 0 <= v <= U64_MAX


def parse_sidecar(line, names, type_name):
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise NotCanonical("not JSON: %s" % e)
    if type(obj) is not dict:
        raise NotCanonical("not an object")
    for k in obj:
        if k not in names:
            raise NotCanonical("unknown field %s" % k)
    if obj.get("type") != type_name or not (type(obj.get("v")) is int and obj["v"] == 1):
        raise NotCanonical("not a version 1 %s" % type_name)
    return obj


def parse_checkpoint(line):
    obj = parse_sidecar(line, CHECKPOINT_NAMES, "checkpoint")
    if not is_u64(obj.get("seq")):
        raise NotCanonical("seq missing")
    if type(obj.get("hash")) is not str or not HEX64.fullmatch(obj["hash"]):
        raise NotCanonical("hash is not 64 lowercase hex digits")
    for k in ("log", "ts", "kind"):
        if type(obj.get(k)) is not str:
            raise NotCanonical("%s missing" % k)
    return obj


def parse_tombstone(line):
    obj = parse_sidecar(line, TOMBSTONE_NAMES, "tombstone")
    if type(obj.get("last_hash")) is not str or not HEX64.fullmatch(obj["last_hash"]):
        raise NotCanonical("last_hash is not 64 lowercase hex digits")
    for k in ("log", "ts", "before"):
        if type(obj.get(k)) is not str:
            raise NotCanonical("%s missing" % k)
    for k in ("first_seq", "last_seq"):
        if not is_u64(obj.get(k)):
            raise NotCanonical("%s missing" % k)
    return obj


def sidecar_lines(path, must_exist):
    """[(line number, text)] of non-blank lines; raises OSError when unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        if must_exist:
            raise
        return []
    text = data.decode("utf-8", "replace")
    pieces = text.split("\n")
    if text.endswith("\n"):
        pieces.pop()
    out = []
    for i, piece in enumerate(pieces):
        if piece.endswith("\r"):
            piece = piece[:-1]
        if piece.strip(WHITESPACE):
            out.append((i + 1, piece))
    return out


# ---- Section 1: series --------------------------------------------------------------------

def is_sidecar(name):
    return (name.startswith(".") or name.endswith(".checkpoint") or name.endswith(".tombstones")
            or name.endswith(".lock") or name.endswith(".tmp") or ".broken-" in name)


def split_name(name):
    base, dot, digits = name.rpartition(".")
    if dot and base and len(digits) >= 12 and re.fullmatch(r"[0-9]+", digits, re.ASCII):
        n = int(digits)
        if n <= U64_MAX:
            return base, n
    return name, None


def discover(paths):
    groups = {}

    def add(path):
        name = os.path.basename(path)
        base, seq = split_name(name)
        key = (0, seq, name) if seq is not None else (1, 0, name)
        groups.setdefault((os.path.dirname(path), base), {})[key] = path

    for p in paths:
        if os.path.isdir(p):
            with os.scandir(p) as it:
                for e in it:
                    if e.is_file(follow_symlinks=False) and not is_sidecar(e.name):
                        add(os.path.join(p, e.name))
        else:
            os.stat(p)  # raises when missing
            add(p)
            name = os.path.basename(p)
            if split_name(name)[1] is None and not is_sidecar(name):
                # An active file stands for its whole series: its rotated files beside it.
                d = os.path.dirname(p)
                with os.scandir(d or ".") as it:
                    for e in it:
                        base, seq = split_name(e.name)
                        if (seq is not None and base == name and not is_sidecar(e.name)
                                and e.is_file(follow_symlinks=False)):
                            add(os.path.join(d, e.name))
    if not groups:
        raise OSError("no audit log files found")
    return [(d, b, [files[k] for k in sorted(files)]) for (d, b), files in sorted(groups.items())]


# ---- Section 9: verifying -------------------------------------------------------------------

class Failed(Exception):
    pass


class Series:
    def __init__(self, directory, base, files, opts):
        self.dir, self.base, self.files, self.opts = directory, base, files, opts
        self.rep = {
            "log": os.path.join(directory, base), "log_id": None, "verdict": "intact",
            "records": 0, "first_seq": None, "last_seq": None, "first_ts": None,
            "last_ts": None, "files": [], "checkpoint": None, "error": None, "warnings": [],
            "open_intents": [],
        }
        self.open_intents = {}
        self.wanted = {}
        self.last_hash = None

    def fail(self, kind, seq, path, line, message):
        self.rep["verdict"] = "unreadable" if kind == "unreadable" else "tampered"
        self.rep["error"] = {"kind": kind, "seq": seq, "file": path, "line": line,
                             "message": message}
        raise Failed()

    def warn(self, text):
        self.rep["warnings"].append(text)

    def absent_file(self, first, after=None):
        """Why records before a file's first record (one with `log`) are absent, or ''."""
        if any(split_name(os.path.basename(f)) == (self.base, first) for f in self.files):
            return ""
        path = os.path.join(self.dir, "%s.%012d" % (self.base, first))
        if os.path.exists(path):
            return ": %s holds them but was not given" % path
        unless = " (unless %s lost its last records)" % after if after else ""
        return ": the rotated file %s is missing%s" % (path, unless)

    def run(self):
        try:
            self.verify()
        except Failed:
            pass
        return self.rep

    def verify(self):
        opts = self.opts
        tomb_path = os.path.join(self.dir, self.base + ".tombstones")
        cp_files = [(os.path.join(self.dir, self.base + ".checkpoint"), False)]
        cp_files += [(p, True) for p in opts.checkpoint]
        # Step 1.
        try:
            tomb_lines = sidecar_lines(tomb_path, False)
            checkpoints = []
            for path, explicit in cp_files:
                for n, line in sidecar_lines(path, explicit):
                    try:
                        cp = parse_checkpoint(line)
                        self.wanted[cp["seq"]] = None
                        checkpoints.append((path, n, cp, None))
                    except NotCanonical as e:
                        checkpoints.append((path, n, None, str(e)))
        except OSError as e:
            self.fail("unreadable", None, None, None, str(e))
        trusted = None
        if opts.trusted:
            try:
                with open(opts.trusted, "rb") as f:
                    trusted = json.loads(f.read().decode("utf-8"))
                ok = (type(trusted) is dict and trusted.get("type") == "trusted"
                      and type(trusted.get("log")) is str and is_u64(trusted.get("seq"))
                      and type(trusted.get("hash")) is str)
                if not ok:
                    self.fail("unreadable", None, None, None, "not a trusted-state file")
                self.wanted[trusted["seq"]] = None
            except FileNotFoundError:
                trusted = None
            except (OSError, ValueError) as e:
                self.fail("unreadable", None, None, None, "trusted state: %s" % e)
        tombs = []
        for n, line in tomb_lines:
            try:
                tombs.append((n, parse_tombstone(line), None))
            except NotCanonical as e:
                tombs.append((n, None, str(e)))
        # Step 2.
        self.chain(tombs)
        # Step 3.
        for n, t, err in tombs:
            if t is None:
                self.fail("malformed", None, tomb_path, n, "tombstone: %s" % err)
            status, msg = signature_status(t, opts.pinned)
            if status == "invalid":
                self.fail("bad_signature", t["last_seq"], tomb_path, n,
                          "tombstone signature: %s" % msg)
        # Step 4.
        self.check_checkpoints(checkpoints)
        # Step 5.
        if opts.trusted:
            self.check_trusted(trusted)

    def chain(self, tombs):
        expected = None  # (seq, hash)
        for fi, path in enumerate(self.files):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                self.fail("unreadable", None, None, None, "%s: %s" % (path, e))
            pieces = data.split(b"\n")
            torn = pieces.pop()
            results = [check_line(p) for p in pieces]
            fr = {"path": path, "records": 0, "first_seq": None, "last_seq": None,
                  "first_ts": None, "last_ts": None, "last_hash": None}
            self.rep["files"].append(fr)
            for li, (status, val) in enumerate(results):
                line_no = li + 1
                if status == "malformed":
                    self.fail("malformed", None, path, line_no, "malformed record: %s" % val)
                if status == "modified":
                    self.fail("modified", val, path, line_no,
                              "record seq %d was modified: its hash does not match its content" % val)
                info = val
                if expected is None:
                    if info.prev != GENESIS:
                        found = next((t for _, t, _ in tombs if t is not None
                                      and t["last_seq"] + 1 == info.seq
                                      and t["last_hash"] == info.prev), None)
                        if found is None:
                            self.fail("missing", info.seq, path, line_no,
                                      "records before seq %d are missing: no genesis and no tombstone%s"
                                      % (info.seq, self.absent_file(1) if info.log is not None else ""))
                        self.warn("records %d..%d were pruned on %s" % (
                            found["first_seq"], found["last_seq"], found["ts"]))
                else:
                    eseq, ehash = expected
                    if info.seq != eseq + 1 or info.prev != ehash:
                        if li == 0:
                            kind, msg = "gap", "file does not continue the previous one"
                            if info.seq > eseq + 1 and info.log is not None:
                                msg += self.absent_file(eseq + 1, os.path.basename(self.files[fi - 1]))
                        elif info.seq == eseq + 1:
                            kind, msg = "modified", "does not chain on seq %d" % eseq
                        elif info.seq <= eseq or any(
                                s == "ok" and v.seq == eseq + 1 for s, v in results[li + 1:]):
                            kind, msg = "reordered", "seq %d where %d was expected" % (info.seq, eseq + 1)
                        else:
                            kind, msg = "missing", "seq %d follows seq %d" % (info.seq, eseq)
                        self.fail(kind, info.seq, path, line_no, msg)
                if info.log is not None:
                    if self.rep["log_id"] is None:
                        self.rep["log_id"] = info.log
                    elif self.rep["log_id"] != info.log:
                        self.fail("gap", info.seq, path, line_no, "belongs to another log")
                if info.kind is not None:
                    self.warn("seq %d is a %s record" % (info.seq, info.kind))
                if info.seq in self.wanted:
                    self.wanted[info.seq] = info.hash
                if fr["records"] == 0:
                    fr["first_seq"], fr["first_ts"] = info.seq, info.ts
                    if self.rep["records"] == 0:
                        self.rep["first_seq"], self.rep["first_ts"] = info.seq, info.ts
                fr["records"] += 1
                self.rep["records"] += 1
                fr["last_seq"], fr["last_ts"], fr["last_hash"] = info.seq, info.ts, info.hash
                self.rep["last_seq"], self.rep["last_ts"] = info.seq, info.ts
                self.last_hash = info.hash
                expected = (info.seq, info.hash)
                self.observe_intents(info.rec)
            if torn:
                seq = expected[0] + 1 if expected else None
                if fi == len(self.files) - 1:
                    self.fail("truncated", seq, path, len(pieces) + 1,
                              "truncated tail: torn last line (%d bytes)" % len(torn))
                self.fail("malformed", None, path, len(pieces) + 1, "file ends without a newline")
        if self.rep["records"] == 0:
            self.warn("the log holds no records")
        for seq, passed in sorted(self.open_intents.items()):
            if passed is None:
                self.warn("intent seq %d has no outcome yet" % seq)
            else:
                self.warn("intent seq %d was never closed (start seq %d passed it)" % (seq, passed))
            self.rep["open_intents"].append({"seq": seq, "passed_start": passed})

    def observe_intents(self, rec):
        """Section 9, step 2b: intents must be closed by an outcome or a reconciliation."""
        def closes(field):
            v = rec.get(field, {}).get("intent")
            return v if type(v) is int and v >= 0 else None
        kind = rec["kind"]
        if kind == "intent":
            self.open_intents[rec["seq"]] = None
        elif kind == "request" and closes("args") is not None:
            self.open_intents.pop(closes("args"), None)
        elif kind == "reconciled" and closes("details") is not None:
            self.open_intents.pop(closes("details"), None)
        elif kind == "start" and "check" in rec.get("details", {}):
            for seq, passed in self.open_intents.items():
                if passed is None:
                    self.open_intents[seq] = rec["seq"]

    def check_checkpoints(self, cps):
        if not cps:
            self.warn("no checkpoint: a cut-off tail or a rewritten log cannot be detected")
            return
        last = self.rep["last_seq"] or 0
        first = self.rep["first_seq"] or 0
        latest = None
        for path, n, cp, err in cps:
            if cp is None:
                self.fail("malformed", None, path, n, "checkpoint: %s" % err)
            status, msg = signature_status(cp, self.opts.pinned)
            if status == "invalid":
                self.fail("bad_signature", cp["seq"], path, n, "checkpoint: %s" % msg)
            if self.rep["log_id"] is not None and cp["log"] != self.rep["log_id"]:
                self.fail("replaced", cp["seq"], path, n, "checkpoint belongs to another log")
            if cp["seq"] > last:
                self.fail("truncated", cp["seq"], path, n,
                          "checkpoint covers seq %d but the log ends at seq %d" % (cp["seq"], last))
            if cp["seq"] < first:
                self.warn("checkpoint seq %d lies in pruned records" % cp["seq"])
                continue
            if self.wanted.get(cp["seq"]) != cp["hash"]:
                self.fail("replaced", cp["seq"], path, n,
                          "record seq %d differs from the checkpoint" % cp["seq"])
            if latest is None or cp["seq"] >= latest["seq"]:
                latest = {"seq": cp["seq"], "ts": cp["ts"], "kind": cp["kind"], "signature": status}
        if latest is not None:
            if latest["signature"] == "unsigned":
                self.warn("the checkpoint is unsigned")
            elif latest["signature"] == "unpinned":
                self.warn("the checkpoint is signed by a key nobody pinned")
            if latest["seq"] < last:
                self.warn("records %d..%d come after the latest checkpoint" % (latest["seq"] + 1, last))
        self.rep["checkpoint"] = latest

    def check_trusted(self, t):
        path = self.opts.trusted
        if t is None:
            self.warn("no earlier trusted state in %s: recording it now" % path)
        else:
            if self.rep["log_id"] is not None and t["log"] != self.rep["log_id"]:
                self.fail("replaced", t["seq"], path, 1, "trusted state is for another log")
            if t["seq"] > (self.rep["last_seq"] or 0):
                self.fail("truncated", t["seq"], path, 1, "log ends before the trusted seq")
            if t["seq"] < (self.rep["first_seq"] or 0):
                self.warn("trusted seq lies in pruned records")
            elif self.wanted.get(t["seq"]) != t["hash"]:
                self.fail("replaced", t["seq"], path, 1, "record differs from the trusted state")
        if self.rep["log_id"] and self.rep["last_seq"] and self.last_hash:
            state = {"type": "trusted", "v": 1, "log": self.rep["log_id"],
                     "seq": self.rep["last_seq"], "hash": self.last_hash,
                     "ts": self.rep["last_ts"],
                     "verified_at": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(enc_sidecar(state) + b"\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)


def render(rep):
    out = []
    for s in rep["series"]:
        out.append("%s  %s" % (s["verdict"].upper(), s["log"]))
        e = s["error"]
        if e:
            out.append("  first bad record: seq %s, %s line %s" % (e["seq"], e["file"], e["line"]))
            out.append("  what is wrong: %s: %s" % (e["kind"], e["message"]))
        out.append("  %d records checked, seq %s..%s, %s .. %s" % (
            s["records"], s["first_seq"], s["last_seq"], s["first_ts"], s["last_ts"]))
        if s["checkpoint"]:
            c = s["checkpoint"]
            out.append("  checkpoint: seq %d (%s, %s), signature %s" % (
                c["seq"], c["kind"], c["ts"], c["signature"]))
        for w in s["warnings"]:
            out.append("  warning: " + w)
    if rep.get("error"):
        out.append("UNREADABLE  " + rep["error"])
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--pubkey")
    ap.add_argument("--checkpoint", action="append", default=[])
    ap.add_argument("--trusted")
    try:
        opts = ap.parse_args(argv)
    except SystemExit:
        return 2
    try:
        opts.pinned = load_public_key(opts.pubkey) if opts.pubkey else None
        if opts.pinned is not None and len(opts.pinned) != 32:
            raise ValueError("public key is not 32 bytes")
    except (OSError, ValueError) as e:
        print("verify.py: bad --pubkey: %s" % e, file=sys.stderr)
        return 2
    try:
        groups = discover(opts.paths)
    except OSError as e:
        rep = {"verdict": "unreadable", "series": [], "error": str(e)}
    else:
        if opts.trusted and len(groups) > 1:
            rep = {"verdict": "unreadable", "series": [],
                   "error": "--trusted needs exactly one log, but several were given"}
        else:
            series = [Series(d, b, f, opts).run() for d, b, f in groups]
            verdicts = {s["verdict"] for s in series}
            verdict = ("tampered" if "tampered" in verdicts else
                       "unreadable" if "unreadable" in verdicts else "intact")
            rep = {"verdict": verdict, "series": series}
    print(json.dumps(rep, indent=2) if opts.json else render(rep))
    return {"intact": 0, "tampered": 1, "unreadable": 2}[rep["verdict"]]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
