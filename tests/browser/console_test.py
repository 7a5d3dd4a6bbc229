"""Drives the aip web console in Debian's chromium through Playwright (never a downloaded browser).

Called by crates/aip-cli/tests/console_browser.rs with a running `aip serve` and the ids it prepared;
prints one line per step and exits non-zero on the first failure. Screenshots go to --shots.
"""
import argparse
import json
import sys

from playwright.sync_api import expect, sync_playwright

CHROMIUM = "/usr/lib/chromium/chromium"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--stream-only", action="store_true", help="only follow --action's stream through --url (a cutting proxy)")
    p.add_argument("--exporter", help="token of an approver holding the export scopes")
    p.add_argument("--approver", help="token of the second approver")
    p.add_argument("--requester", required=True, help="token of the transfer's requester")
    p.add_argument("--outsider", help="token of a principal who may decide nothing")
    p.add_argument("--approval")
    p.add_argument("--own-approval", help="an approval the second approver requested itself")
    p.add_argument("--action", required=True)
    p.add_argument("--tampered", help="an action whose stored receipt was altered")
    p.add_argument("--axe", help="path of axe.min.js")
    p.add_argument("--shots", required=True)
    a = p.parse_args()
    if a.stream_only:
        return stream_only(a)
    axe_source = open(a.axe, encoding="utf-8").read()
    problems = []

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        page = browser.new_context().new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))

        def accessible(name: str) -> None:
            page.evaluate(axe_source + ";0")
            result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
            bad = [v for v in result["violations"] if v["impact"] in ("serious", "critical")]
            if bad:
                raise SystemExit(f"{name}: axe violations: {json.dumps([(v['id'], v['help']) for v in bad])}")
            print(f"ok: {name} has no serious accessibility violations")

        def sign_in(token: str) -> None:
            page.goto(f"{a.url}/console/")
            expect(page.get_by_label("Bearer token")).to_be_visible()
            page.get_by_label("Bearer token").fill(token)
            page.get_by_role("button", name="Sign in").click()
            expect(page.locator("#who")).to_contain_text("signed in as")

        # An approver with the export scopes may reveal the governed input; the export is audited.
        sign_in(a.exporter)
        card = page.get_by_role("article", name=f"Approval {a.approval}")
        card.get_by_role("button", name="Show governed input (audited export)").click()
        expect(card).to_contain_text("acct:bob")
        print("ok: the governed input is shown only on an audited export")
        page.get_by_role("button", name="Sign out").click()

        # Sign-in page.
        page.goto(f"{a.url}/console/")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        page.screenshot(path=f"{a.shots}/signin.png", full_page=True)
        accessible("sign-in")
        # The token never lands in the URL.
        sign_in(a.approver)
        assert a.approver not in page.url, "the token is in the URL"
        stored = page.evaluate("sessionStorage.getItem('aip.console.token')")
        assert stored == a.approver, "the token is not in session storage"
        assert page.evaluate("localStorage.length") == 0, "the token leaked into local storage"
        assert page.context.cookies() == [], "the console set a cookie"
        print("ok: signed in; token only in session storage")

        # The approvals inbox shows the pending approval; keyboard reaches its controls.
        card = page.get_by_role("article", name=f"Approval {a.approval}")
        expect(card).to_be_visible()
        expect(card).to_contain_text("cap:demo:transfer")
        expect(card).to_contain_text("1 of 2 distinct approval(s) so far: approver-1")
        expect(card).to_contain_text("withheld")
        expect(card.locator(".mono").last).not_to_have_text("expired")
        expect(card.get_by_role("button", name="Show governed input (audited export)")).to_have_count(0)
        page.screenshot(path=f"{a.shots}/approvals.png", full_page=True)
        accessible("approvals inbox")
        reached = set()
        page.locator("body").focus()
        for _ in range(40):
            page.keyboard.press("Tab")
            reached.add(page.evaluate("document.activeElement.textContent.trim() || document.activeElement.id"))
        for control in ("Approve", "Deny", "Sign out", "Approvals", "Actions"):
            assert control in reached, f"{control} is not reachable by keyboard: {reached}"
        print("ok: every control of the inbox is reachable by keyboard")

        # A refused decision shows its typed error: approving one's own request.
        own = page.get_by_role("article", name=f"Approval {a.own_approval}")
        own.get_by_role("button", name="Approve").click()
        expect(own).to_contain_text("Refused: aip.policy.separation_of_duties")
        print("ok: a refused decision shows its typed error")

        # Approve as the second approver: the normal decision API, then the action runs.
        card.get_by_label("Reason").fill("second approval from the console")
        card.get_by_role("button", name="Approve").click()
        expect(card).to_contain_text("the approval is now approved")
        print("ok: approved as the second approver")

        # The requester watches its action run to completion (the approver may not read it).
        page.get_by_role("button", name="Sign out").click()
        sign_in(a.requester)
        page.goto(f"{a.url}/console/#action/{a.action}")
        expect(page.locator("#action-state")).to_have_text("completed", timeout=15000)
        expect(page.locator("#action-events")).to_contain_text("aip.action.completed")
        page.screenshot(path=f"{a.shots}/action.png", full_page=True)
        accessible("action timeline")
        page.get_by_role("button", name="Verify receipt chain").click()
        expect(page.locator("#verify-status")).to_contain_text("Chain verified")
        expect(page.locator("#receipts li.broken")).to_have_count(0)
        page.screenshot(path=f"{a.shots}/receipts.png", full_page=True)
        print("ok: the action completed on its timeline and its receipts verify in the browser")

        # A tampered chain is flagged at its first broken link.
        page.goto(f"{a.url}/console/#action/{a.tampered}")
        expect(page.locator("#action-state")).to_have_text("completed")
        page.get_by_role("button", name="Verify receipt chain").click()
        expect(page.locator("#verify-status")).to_contain_text("Broken at receipt")
        expect(page.locator("#receipts li.broken")).to_have_count(1)
        expect(page.locator("#receipts li.broken")).to_contain_text("hash mismatch")
        page.screenshot(path=f"{a.shots}/tampered.png", full_page=True)
        print("ok: the tampered receipt is flagged")

        # The actions list.
        page.goto(f"{a.url}/console/#actions")
        expect(page.locator("#actions-table")).to_contain_text(a.action)
        page.screenshot(path=f"{a.shots}/actions.png", full_page=True)
        accessible("actions list")

        # A principal without visibility sees an empty inbox.
        page.get_by_role("button", name="Sign out").click()
        sign_in(a.outsider)
        page.goto(f"{a.url}/console/#approvals")
        expect(page.locator("#approvals-status")).to_have_text("Nothing is waiting for you.")
        print("ok: a principal without visibility sees an empty inbox")

        # A bad token is refused with the typed error.
        page.get_by_role("button", name="Sign out").click()
        page.get_by_label("Bearer token").fill("not-a-token")
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#signin-error")).not_to_be_empty()
        browser.close()

    csp = [p for p in problems if "Content Security Policy" in p]
    if csp:
        print(f"CSP violations: {csp}")
        return 1
    # Refusals the steps provoke on purpose (a bad token, a self-approval) log their status.
    expected = ("status of 401", "status of 403")
    unexpected = [p for p in problems if not any(e in p for e in expected)]
    if unexpected:
        print(f"console errors: {unexpected}")
        return 1
    print("console: all steps passed")
    return 0


def stream_only(a) -> int:
    """Follows a streaming action's chunks while the proxy behind --url cuts the connection: every
    chunk must appear once, in order, and the result at the end."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        page = browser.new_context().new_page()
        page.goto(f"{a.url}/console/")
        page.get_by_label("Bearer token").fill(a.requester)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#who")).to_contain_text("signed in as")
        page.goto(f"{a.url}/console/#action/{a.action}")
        expect(page.locator("#stream-status")).to_contain_text("Finished: completed", timeout=30000)
        items = page.locator("#action-chunks li").all_inner_texts()
        sequences = [int(t.split()[0].lstrip("#")) for t in items]
        page.screenshot(path=f"{a.shots}/stream.png", full_page=True)
        browser.close()
    if sequences != list(range(1, len(sequences) + 1)) or len(sequences) < 60:
        print(f"chunks lost, repeated or out of order: {sequences}")
        return 1
    print(f"console: stream followed across cuts, {len(sequences)} chunks once each")
    return 0


if __name__ == "__main__":
    sys.exit(main())
