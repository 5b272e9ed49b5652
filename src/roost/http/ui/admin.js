// Admin: users, virtual hosts, policies, and definitions export / import.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { attempt, field, flash, vhostSelect } from "./widgets.js";

function section(title, ...children) { return el("section", { class: "card" }, el("h2", {}, title), ...children); }

function form(testid, fields, label, submit) {
  const node = el("form", { class: "inline", "data-testid": testid }, ...fields, el("button", { type: "submit" }, label));
  node.addEventListener("submit", (ev) => { ev.preventDefault(); submit(new FormData(node)); });
  return node;
}

export async function admin(main) {
  const users = new Table("users", [{ key: "name", label: "Name" }, { key: "tags", label: "Tags" }]);
  const vhosts = new Table("vhosts", [
    { key: "name", label: "Name" }, { key: "description", label: "Description" },
    { key: "messages", label: "Messages", num: true },
  ]);
  const policies = new Table("policies", [
    { key: "vhost", label: "Vhost" }, { key: "name", label: "Name" }, { key: "pattern", label: "Pattern" },
    { key: "apply-to", label: "Apply to" }, { key: "definition", label: "Definition" },
    { key: "priority", label: "Priority", num: true },
  ]);
  const refresh = async () => {
    const [u, v, p] = await Promise.all([api("/api/users"), api("/api/vhosts"), api("/api/policies")]);
    users.set(u); vhosts.set(v); policies.set(p);
  };
  const addUser = form("add-user", [
    field("Name", el("input", { name: "name", required: true })),
    field("Password", el("input", { name: "password", type: "password" })),
    field("Tags", el("input", { name: "tags", placeholder: "management" })),
  ], "Add user", (f) => attempt(async () => {
    await api(`/api/users/${seg(f.get("name"))}`, { method: "PUT", body: { password: f.get("password"), tags: f.get("tags") } });
    await refresh();
  }, `User ${f.get("name")} saved`));
  const addVhost = form("add-vhost", [
    field("Name", el("input", { name: "name", required: true })),
    field("Description", el("input", { name: "description" })),
  ], "Add virtual host", (f) => attempt(async () => {
    await api(`/api/vhosts/${seg(f.get("name"))}`, { method: "PUT", body: { description: f.get("description") } });
    await refresh();
  }, `Virtual host ${f.get("name")} saved`));
  const addPolicy = form("add-policy", [
    field("Virtual host", await vhostSelect()),
    field("Name", el("input", { name: "name", required: true })),
    field("Pattern", el("input", { name: "pattern", value: ".*" })),
    field("Apply to", el("select", { name: "apply-to" }, ["all", "queues", "exchanges"].map((v) => el("option", { value: v }, v)))),
    field("Definition (JSON)", el("input", { name: "definition", value: '{"max-length": 1000}' })),
    field("Priority", el("input", { name: "priority", type: "number", value: "0" })),
  ], "Add policy", (f) => attempt(async () => {
    await api(`/api/policies/${seg(f.get("vhost"))}/${seg(f.get("name"))}`, {
      method: "PUT",
      body: { pattern: f.get("pattern"), "apply-to": f.get("apply-to"), definition: JSON.parse(f.get("definition")), priority: Number(f.get("priority")) },
    });
    await refresh();
  }, `Policy ${f.get("name")} saved`));
  const exportButton = el("button", { type: "button", "data-testid": "export-definitions" }, "Download definitions");
  exportButton.addEventListener("click", () => attempt(async () => {
    const defs = await api("/api/definitions");
    const url = URL.createObjectURL(new Blob([JSON.stringify(defs, null, 2)], { type: "application/json" }));
    const a = el("a", { href: url, download: "roost-definitions.json" });
    document.body.append(a); a.click(); a.remove(); URL.revokeObjectURL(url);
  }));
  const file = el("input", { type: "file", accept: ".json,application/json", "data-testid": "import-file" });
  const importButton = el("button", { type: "button", "data-testid": "import-definitions" }, "Upload definitions");
  importButton.addEventListener("click", () => attempt(async () => {
    if (!file.files.length) { flash("Choose a definitions file first", false); return; }
    const text = await file.files[0].text();
    const res = await api("/api/definitions?report=true", { method: "POST", body: text });
    const n = Object.values(res.imported).reduce((a, b) => a + b, 0);
    flash(`Imported ${n} objects`);
    await refresh();
  }));
  main.replaceChildren(
    el("h1", {}, "Admin"),
    el("h2", {}, "Users"), users.node, section("Add or update a user", addUser),
    el("h2", {}, "Virtual hosts"), vhosts.node, section("Add a virtual host", addVhost),
    el("h2", {}, "Policies"), policies.node, section("Add or update a policy", addPolicy),
    section("Definitions", el("p", { class: "muted" }, "Users, vhosts, permissions, policies, exchanges, queues and bindings in RabbitMQ's JSON format."),
      exportButton, " ", file, importButton),
  );
  return refresh;
}
