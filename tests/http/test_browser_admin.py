"""The web UI's admin side in headless Chromium (Debian's, as tests/http/test_browser.py):
permissions and topic permissions, vhost and user limits, policies and operator
policies, runtime and global parameters, each set and cleared from the page and read
back through the API; and a listener's port shown as a number."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.http.conftest import json_of
from tests.support import RoostProcess, browser_page


@pytest.fixture
def page(mgmt: RoostProcess) -> Iterator[object]:
    with browser_page(viewport={"width": 1280, "height": 900}) as pg:
        pg.on("dialog", lambda dialog: dialog.accept())  # the Clear / Delete confirmations
        pg.goto(mgmt.http_url + "/")
        login = pg.get_by_test_id("login")
        login.locator("input[name=username]").fill("guest")
        login.locator("input[name=password]").fill("guest")
        login.get_by_role("button", name="Sign in").click()
        pg.locator("#whoami").filter(has_text="guest").wait_for()
        yield pg


@pytest.fixture
def other(http: httpx.Client, name: str) -> Iterator[str]:
    """A user and a vhost of the test's name, for the forms' selects."""
    assert http.put(f"/api/vhosts/{name}", json={}).status_code in (201, 204)
    assert http.put(f"/api/users/{name}", json={"password": "pw", "tags": ""}).status_code in (
        201,
        204,
    )
    yield name
    http.delete(f"/api/users/{name}")
    http.delete(f"/api/vhosts/{name}")


def test_listener_port_is_a_number(page, mgmt: RoostProcess) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/#/")
    ports = page.get_by_test_id("listeners-table").locator("td[data-col=port]")
    expect(ports.first).to_have_text(str(mgmt.amqp_port))
    texts = ports.all_inner_texts()
    assert str(mgmt.http_port) in texts and not any("," in t for t in texts)


def test_permissions_and_topic_permissions(  # type: ignore[no-untyped-def]
    page, mgmt: RoostProcess, http: httpx.Client, other: str, shots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/#/admin/permissions")
    f = page.get_by_test_id("set-permission")
    f.locator("select[name=user]").select_option(other)
    f.locator("select[name=vhost]").select_option(other)
    f.locator("input[name=configure]").fill("^cfg")
    f.locator("input[name=write]").fill("^w")
    f.locator("input[name=read]").fill("^r")
    f.get_by_role("button", name="Set permission").click()
    expect(page.get_by_test_id("flash")).to_contain_text(f"Permissions of {other} in {other} set")
    assert json_of(http.get(f"/api/permissions/{other}/{other}"))["configure"] == "^cfg"
    row = page.get_by_test_id("permissions-table").locator("tr", has_text="^cfg")
    expect(row).to_contain_text(other)

    t = page.get_by_test_id("set-topic-permission")
    t.locator("select[name=user]").select_option(other)
    t.locator("select[name=vhost]").select_option(other)
    t.locator("input[name=write]").fill("^orders\\.")
    t.get_by_role("button", name="Set topic permission").click()
    expect(page.get_by_test_id("topic-permissions-table")).to_contain_text("^orders\\.")
    topic = json_of(http.get(f"/api/topic-permissions/{other}/{other}"))
    assert topic == [
        {
            "user": other,
            "vhost": other,
            "exchange": "amq.topic",
            "write": "^orders\\.",
            "read": ".*",
        }
    ]
    page.screenshot(path=str(shots / "admin-permissions.png"), full_page=True)

    page.get_by_test_id("topic-permissions-table").locator(
        "tr", has_text="^orders\\."
    ).get_by_test_id("clear-topic-permission").click()
    expect(page.get_by_test_id("flash")).to_contain_text("cleared")
    assert http.get(f"/api/topic-permissions/{other}/{other}").status_code == 404
    row.get_by_test_id("clear-permission").click()
    expect(page.get_by_test_id("permissions-table")).not_to_contain_text("^cfg")
    assert http.get(f"/api/permissions/{other}/{other}").status_code == 404


def test_vhost_and_user_limits(  # type: ignore[no-untyped-def]
    page, mgmt: RoostProcess, http: httpx.Client, other: str, shots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/#/admin/limits")
    v = page.get_by_test_id("set-vhost-limit")
    v.locator("select[name=vhost]").select_option(other)
    v.locator("select[name=limit]").select_option("max-queues")
    v.locator("input[name=value]").fill("12")
    v.get_by_role("button", name="Set limit").click()
    expect(page.get_by_test_id("vhost-limits-table")).to_contain_text("max-queues")
    assert json_of(http.get(f"/api/vhost-limits/{other}"))[0]["value"] == {"max-queues": 12}
    u = page.get_by_test_id("set-user-limit")
    u.locator("select[name=user]").select_option(other)
    u.locator("select[name=limit]").select_option("max-channels")
    u.locator("input[name=value]").fill("3")
    u.get_by_role("button", name="Set limit").click()
    expect(page.get_by_test_id("user-limits-table")).to_contain_text("max-channels")
    assert json_of(http.get(f"/api/user-limits/{other}"))[0]["value"] == {"max-channels": 3}
    page.screenshot(path=str(shots / "admin-limits.png"), full_page=True)
    page.get_by_test_id("vhost-limits-table").locator("tr", has_text=other).get_by_test_id(
        "clear-vhost-limit"
    ).click()
    expect(page.get_by_test_id("vhost-limits-table")).not_to_contain_text(other)
    assert json_of(http.get(f"/api/vhost-limits/{other}")) == []
    page.get_by_test_id("user-limits-table").locator("tr", has_text=other).get_by_test_id(
        "clear-user-limit"
    ).click()
    expect(page.get_by_test_id("user-limits-table")).not_to_contain_text(other)
    assert json_of(http.get(f"/api/user-limits/{other}")) == []


def test_policies(  # type: ignore[no-untyped-def]
    page, mgmt: RoostProcess, http: httpx.Client, other: str, shots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/#/admin/policies")
    f = page.get_by_test_id("add-policies")
    f.locator("select[name=vhost]").select_option(other)
    f.locator("input[name=name]").fill("cap")
    f.locator("input[name=pattern]").fill("^jobs")
    f.locator("select[name=apply-to]").select_option("queues")
    f.locator("input[name=definition]").fill("{not json")
    f.get_by_role("button", name="Add policy").click()
    expect(page.get_by_test_id("flash")).to_contain_text("The definition is not valid JSON")
    f.locator("input[name=definition]").fill('{"max-length": 10}')
    f.get_by_role("button", name="Add policy").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Policy cap saved")
    policy = json_of(http.get(f"/api/policies/{other}/cap"))
    assert (policy["pattern"], policy["apply-to"], policy["definition"]) == (
        "^jobs",
        "queues",
        {"max-length": 10},
    )
    page.screenshot(path=str(shots / "admin-policies.png"), full_page=True)
    page.get_by_test_id("policies-table").locator("tr", has_text="^jobs").get_by_test_id(
        "delete-policies"
    ).click()
    expect(page.get_by_test_id("policies-table")).not_to_contain_text("^jobs")
    assert http.get(f"/api/policies/{other}/cap").status_code == 404


def test_operator_policies_and_parameters(  # type: ignore[no-untyped-def]
    page, mgmt: RoostProcess, http: httpx.Client, other: str, shots: Path
) -> None:
    from playwright.sync_api import expect

    page.goto(mgmt.http_url + "/#/admin/policies")
    f = page.get_by_test_id("add-operator-policies")
    f.locator("select[name=vhost]").select_option(other)
    f.locator("input[name=name]").fill("ops-cap")
    f.locator("input[name=definition]").fill('{"ha-mode": "all"}')
    f.get_by_role("button", name="Add operator policy").click()
    expect(page.get_by_test_id("flash")).to_contain_text("are not recognised policy settings")
    f.locator("input[name=definition]").fill('{"max-length": 100}')
    f.get_by_role("button", name="Add operator policy").click()
    expect(page.get_by_test_id("flash")).to_contain_text("Operator policy ops-cap saved")
    expect(page.get_by_test_id("operator-policies-table")).to_contain_text("ops-cap")
    assert json_of(http.get(f"/api/operator-policies/{other}/ops-cap"))["definition"] == {
        "max-length": 100
    }
    page.get_by_test_id("operator-policies-table").locator("tr", has_text="ops-cap").get_by_test_id(
        "delete-operator-policies"
    ).click()
    expect(page.get_by_test_id("operator-policies-table")).not_to_contain_text("ops-cap")
    assert http.get(f"/api/operator-policies/{other}/ops-cap").status_code == 404

    page.goto(mgmt.http_url + "/#/admin/parameters")
    p = page.get_by_test_id("set-parameter")
    p.locator("select[name=vhost]").select_option(other)
    p.locator("input[name=component]").fill("federation-upstream")
    p.locator("input[name=name]").fill("origin")
    p.locator("input[name=value]").fill('{"uri": "amqp://origin.example"}')
    p.get_by_role("button", name="Set parameter").click()
    expect(page.get_by_test_id("parameters-table")).to_contain_text("amqp://origin.example")
    assert json_of(http.get(f"/api/parameters/federation-upstream/{other}/origin"))["value"] == {
        "uri": "amqp://origin.example"
    }
    g = page.get_by_test_id("set-global-parameter")
    g.locator("input[name=name]").fill(f"{other}-note")
    g.locator("input[name=value]").fill('"blue"')
    g.get_by_role("button", name="Set global parameter").click()
    expect(page.get_by_test_id("global-parameters-table")).to_contain_text(f"{other}-note")
    assert json_of(http.get(f"/api/global-parameters/{other}-note"))["value"] == "blue"
    # what runs the parameters: a shovel's status row, shown on the same page
    http.put(f"/api/parameters/shovel/{other}/mover", json={"value": {
        "src-uri": "amqp://", "src-queue": "a", "dest-uri": "amqp://", "dest-queue": "b",
        "reconnect-delay": 30}}).raise_for_status()
    page.reload()
    expect(page.get_by_test_id("shovel-status-table")).to_contain_text("mover")
    expect(page.get_by_test_id("shovel-status-table")).to_contain_text("dynamic")
    expect(page.get_by_test_id("federation-status-table")).to_have_count(1)
    page.screenshot(path=str(shots / "admin-parameters.png"), full_page=True)
    page.get_by_test_id("parameters-table").locator("tr", has_text="origin").get_by_test_id(
        "delete-parameter"
    ).click()
    expect(page.get_by_test_id("parameters-table")).not_to_contain_text("origin")
    page.get_by_test_id("global-parameters-table").locator(
        "tr", has_text=f"{other}-note"
    ).get_by_test_id("delete-global-parameter").click()
    expect(page.get_by_test_id("global-parameters-table")).not_to_contain_text(f"{other}-note")
    assert http.get(f"/api/global-parameters/{other}-note").status_code == 404
