// Admin › Limits: per-vhost (max-connections, max-queues) and per-user (max-connections,
// max-channels) limits, as RabbitMQ's /api/vhost-limits and /api/user-limits hold them.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { actionColumn, adminNav, attempt, field, form, section, userSelect, vhostSelect } from "./widgets.js";

// one row per limit, from RabbitMQ's {vhost|user, value: {name: n}} objects
const flat = (rows, owner) => rows.flatMap((r) => Object.entries(r.value || {}).map(([name, value]) => ({ [owner]: r[owner], limit: name, value })));

export async function limitsPage(main) {
  let refresh = null;
  const clear = (kind, owner) => (r) => attempt(async () => {
    await api(`/api/${kind}/${seg(r[owner])}/${seg(r.limit)}`, { method: "DELETE" });
    await refresh();
  }, `Limit ${r.limit} of ${r[owner]} cleared`);
  const vhostLimits = new Table("vhost-limits", [
    { key: "vhost", label: "Virtual host" }, { key: "limit", label: "Limit" }, { key: "value", label: "Value", num: true },
    actionColumn("Clear", "clear-vhost-limit", (r) => `Clear ${r.limit} of ${r.vhost}?`, clear("vhost-limits", "vhost")),
  ]);
  const userLimits = new Table("user-limits", [
    { key: "user", label: "User" }, { key: "limit", label: "Limit" }, { key: "value", label: "Value", num: true },
    actionColumn("Clear", "clear-user-limit", (r) => `Clear ${r.limit} of ${r.user}?`, clear("user-limits", "user")),
  ]);
  refresh = async () => {
    const [v, u] = await Promise.all([api("/api/vhost-limits"), api("/api/user-limits")]);
    vhostLimits.set(flat(v, "vhost")); userLimits.set(flat(u, "user"));
  };
  const names = (...options) => el("select", { name: "limit" }, options.map((o) => el("option", { value: o }, o)));
  const value = () => el("input", { name: "value", type: "number", min: "-1", required: true, placeholder: "-1 = no limit" });
  const setVhost = form("set-vhost-limit", [
    field("Virtual host", await vhostSelect()), field("Limit", names("max-connections", "max-queues")), field("Value", value()),
  ], "Set limit", (f) => attempt(async () => {
    await api(`/api/vhost-limits/${seg(f.get("vhost"))}/${seg(f.get("limit"))}`, { method: "PUT", body: { value: Number(f.get("value")) } });
    await refresh();
  }, `Limit ${f.get("limit")} of ${f.get("vhost")} set`));
  const setUser = form("set-user-limit", [
    field("User", await userSelect()), field("Limit", names("max-connections", "max-channels")), field("Value", value()),
  ], "Set limit", (f) => attempt(async () => {
    await api(`/api/user-limits/${seg(f.get("user"))}/${seg(f.get("limit"))}`, { method: "PUT", body: { value: Number(f.get("value")) } });
    await refresh();
  }, `Limit ${f.get("limit")} of ${f.get("user")} set`));
  main.replaceChildren(
    el("h1", {}, "Admin"), adminNav("/limits"),
    el("h2", {}, "Virtual host limits"), vhostLimits.node, section("Set a virtual host limit", setVhost),
    el("h2", {}, "User limits"), userLimits.node, section("Set a user limit", setUser),
  );
  return refresh;
}
