"""Mutation check (spec 15): break the implementation at seven named points and require the
conformance corpus test to go red on each. Each mutation is applied to the source, the corpus test is
run, and the source is restored. The seventh point (a calibration flip of one expected code) is the
test `a_flipped_expected_code_turns_the_run_red_with_exit_one` in crates/aip-cli/tests/abp_cli.rs.

Usage: python3 crates/abp/mutation_check.py   (needs ../shared/abp-conformance)
"""
import os, shutil, subprocess, sys, tempfile

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "src")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
muts = [
 ("1 bounds meet min->max", "bounds.rs", "out.operational[i] = self.operational[i].min(other.operational[i]);", "out.operational[i] = self.operational[i].max(other.operational[i]);"),
 ("2 duplicate-member check", "json.rs", "if !seen.insert(key.clone()) {", "if !seen.insert(key.clone()) && false {"),
 ("3 UTF-16 member order", "jcs.rs", "(Some(x), Some(y)) => first_unit(x).cmp(&first_unit(y)).then(x.cmp(&y)),", "(Some(x), Some(y)) => x.cmp(&y),"),
 ("4 padded base64url acceptance", "base64url.rs", "    let s = text.as_bytes();\n    if s.contains(&b'=') {\n        return Err(Error::new(Code::Base64urlPadded, \"base64url\"));\n    }", "    let s = text.trim_end_matches('=').as_bytes();"),
 ("5 revision-set check", "extension.rs", "if !support.revisions.contains(&revision) {", "if false && !support.revisions.contains(&revision) {"),
 ("6 obligation meet (strictest->loosest)", "bounds.rs", "self.protected[i].max(other.protected[i])\n            } else {", "self.protected[i].min(other.protected[i])\n            } else {"),
]
failed = False
for name, f, old, new in muts:
    f = os.path.join(SRC, f)
    src = open(f).read()
    assert src.count(old) == 1, (name, src.count(old))
    backup = tempfile.mktemp()
    shutil.copy(f, backup)
    open(f, "w").write(src.replace(old, new))
    try:
        r = subprocess.run(["cargo", "test", "-q", "-p", "abp", "--test", "conformance", "--", "--nocapture"], cwd=ROOT, capture_output=True, text=True)
        out = r.stdout + r.stderr
        dis = [l.split(':')[0].replace('DISAGREE ','') for l in out.splitlines() if l.startswith("DISAGREE")]
        print(f"{name}: {'RED' if r.returncode else 'GREEN'} ({len(dis)} disagreements: {', '.join(dis)})", flush=True)
        failed |= r.returncode == 0
    finally:
        shutil.copy(backup, f)
        os.remove(backup)
sys.exit(1 if failed else 0)
