// Admin › Parameters: runtime parameters per vhost and component (shovels, federation
// upstreams, …) and global parameters, as RabbitMQ's /api/parameters and
// /api/global-parameters hold them; and what runs them: the shovels' and federation
// links' status (/api/shovels, /api/federation-links).
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { actionColumn, adminNav, attempt, field, form, parseJSON, section, vhostSelect } from "./widgets.js";

export async function parametersPage(main) {
  let refresh = null;
  const removeParameter = (r) => attempt(async () => {
    await api(`/api/parameters/${seg(r.component)}/${seg(r.vhost)}/${seg(r.name)}`, { method: "DELETE" });
    await refresh();
  }, `Parameter ${r.name} deleted`);
  const removeGlobal = (r) => attempt(async () => {
    await api(`/api/global-parameters/${seg(r.name)}`, { method: "DELETE" });
    await refresh();
  }, `Global parameter ${r.name} deleted`);
  const parameters = new Table("parameters", [
    { key: "vhost", label: "Virtual host" }, { key: "component", label: "Component" },
    { key: "name", label: "Name" }, { key: "value", label: "Value" },
    actionColumn("Delete", "delete-parameter", (r) => `Delete parameter ${r.name}?`, removeParameter),
  ]);
  const globals = new Table("global-parameters", [
    { key: "name", label: "Name" }, { key: "value", label: "Value" },
    actionColumn("Delete", "delete-global-parameter", (r) => `Delete global parameter ${r.name}?`, removeGlobal),
  ]);
  const shovels = new Table("shovel-status", [
    { key: "vhost", label: "Virtual host" }, { key: "name", label: "Name" },
    { key: "type", label: "Type" }, { key: "state", label: "State" },
    { key: "src_uri", label: "Source" }, { key: "dest_uri", label: "Destination" },
    { key: "reason", label: "Reason" }, { key: "timestamp", label: "Since" },
  ]);
  const links = new Table("federation-status", [
    { key: "vhost", label: "Virtual host" }, { key: "type", label: "Type" },
    { key: "exchange", label: "Exchange" }, { key: "queue", label: "Queue" },
    { key: "upstream", label: "Upstream" }, { key: "uri", label: "URI" },
    { key: "status", label: "Status" }, { key: "error", label: "Error" },
    { key: "timestamp", label: "Since" },
  ]);
  refresh = async () => {
    const [p, g, s, f] = await Promise.all([
      api("/api/parameters"), api("/api/global-parameters"),
      api("/api/shovels"), api("/api/federation-links"),
    ]);
    parameters.set(p); globals.set(g); shovels.set(s); links.set(f);
  };
  const setParameter = form("set-parameter", [
    field("Virtual host", await vhostSelect()),
    field("Component", el("input", { name: "component", required: true, placeholder: "federation-upstream" })),
    field("Name", el("input", { name: "name", required: true })),
    field("Value (JSON)", el("input", { name: "value", required: true, size: 40, placeholder: '{"uri": "amqp://host"}' })),
  ], "Set parameter", (f) => attempt(async () => {
    const [vhost, component, name] = [f.get("vhost"), f.get("component"), f.get("name")];
    await api(`/api/parameters/${seg(component)}/${seg(vhost)}/${seg(name)}`, {
      method: "PUT", body: { vhost, component, name, value: parseJSON(f.get("value"), "The value") },
    });
    await refresh();
  }, `Parameter ${f.get("name")} saved`));
  const setGlobal = form("set-global-parameter", [
    field("Name", el("input", { name: "name", required: true })),
    field("Value (JSON)", el("input", { name: "value", required: true, size: 40 })),
  ], "Set global parameter", (f) => attempt(async () => {
    await api(`/api/global-parameters/${seg(f.get("name"))}`, {
      method: "PUT", body: { name: f.get("name"), value: parseJSON(f.get("value"), "The value") },
    });
    await refresh();
  }, `Global parameter ${f.get("name")} saved`));
  main.replaceChildren(
    el("h1", {}, "Admin"), adminNav("/parameters"),
    el("h2", {}, "Runtime parameters"), parameters.node, section("Set a runtime parameter", setParameter),
    el("h2", {}, "Global parameters"), globals.node, section("Set a global parameter", setGlobal),
    el("h2", {}, "Shovel status"), shovels.node,
    el("h2", {}, "Federation status"), links.node,
  );
  return refresh;
}
