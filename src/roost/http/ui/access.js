// Admin › Permissions: every user's permissions and topic permissions, set and cleared.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { actionColumn, adminNav, attempt, field, form, section, userSelect, vhostSelect } from "./widgets.js";

export async function permissionsPage(main) {
  let refresh = null;
  const clearPermission = (r) => attempt(async () => {
    await api(`/api/permissions/${seg(r.vhost)}/${seg(r.user)}`, { method: "DELETE" });
    await refresh();
  }, `Permissions of ${r.user} in ${r.vhost} cleared`);
  const clearTopic = (r) => attempt(async () => {
    await api(`/api/topic-permissions/${seg(r.vhost)}/${seg(r.user)}?exchange=${seg(r.exchange)}`, { method: "DELETE" });
    await refresh();
  }, `Topic permissions of ${r.user} on ${r.exchange} cleared`);
  const permissions = new Table("permissions", [
    { key: "user", label: "User" }, { key: "vhost", label: "Virtual host" },
    { key: "configure", label: "Configure" }, { key: "write", label: "Write" }, { key: "read", label: "Read" },
    actionColumn("Clear", "clear-permission", (r) => `Clear the permissions of ${r.user} in ${r.vhost}?`, clearPermission),
  ]);
  const topics = new Table("topic-permissions", [
    { key: "user", label: "User" }, { key: "vhost", label: "Virtual host" }, { key: "exchange", label: "Exchange" },
    { key: "write", label: "Write" }, { key: "read", label: "Read" },
    actionColumn("Clear", "clear-topic-permission", (r) => `Clear the topic permissions of ${r.user} on ${r.exchange}?`, clearTopic),
  ]);
  refresh = async () => {
    const [p, t] = await Promise.all([api("/api/permissions"), api("/api/topic-permissions")]);
    permissions.set(p); topics.set(t);
  };
  const regex = (name, value = ".*") => el("input", { name, value, size: 10 });
  const setPermission = form("set-permission", [
    field("User", await userSelect()), field("Virtual host", await vhostSelect()),
    field("Configure regexp", regex("configure")), field("Write regexp", regex("write")), field("Read regexp", regex("read")),
  ], "Set permission", (f) => attempt(async () => {
    await api(`/api/permissions/${seg(f.get("vhost"))}/${seg(f.get("user"))}`, {
      method: "PUT", body: { configure: f.get("configure"), write: f.get("write"), read: f.get("read") },
    });
    await refresh();
  }, `Permissions of ${f.get("user")} in ${f.get("vhost")} set`));
  const setTopic = form("set-topic-permission", [
    field("User", await userSelect()), field("Virtual host", await vhostSelect()),
    field("Exchange", el("input", { name: "exchange", value: "amq.topic" })),
    field("Write regexp", regex("write")), field("Read regexp", regex("read")),
  ], "Set topic permission", (f) => attempt(async () => {
    await api(`/api/topic-permissions/${seg(f.get("vhost"))}/${seg(f.get("user"))}`, {
      method: "PUT", body: { exchange: f.get("exchange"), write: f.get("write"), read: f.get("read") },
    });
    await refresh();
  }, `Topic permission of ${f.get("user")} on ${f.get("exchange")} set`));
  main.replaceChildren(
    el("h1", {}, "Admin"), adminNav("/permissions"),
    el("h2", {}, "Permissions"), permissions.node, section("Set permissions (replaces the user's in that vhost)", setPermission),
    el("h2", {}, "Topic permissions"), topics.node,
    section("Set a topic permission (routing keys on one topic exchange)", setTopic),
  );
  return refresh;
}
