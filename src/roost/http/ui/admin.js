// Admin: users, virtual hosts and definitions export / import; the sub-navigation leads
// to permissions (access.js), limits (limits.js), policies and parameters.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { adminNav, attempt, field, flash, form, section } from "./widgets.js";

export async function admin(main) {
  const users = new Table("users", [{ key: "name", label: "Name" }, { key: "tags", label: "Tags" }]);
  const vhosts = new Table("vhosts", [
    { key: "name", label: "Name" }, { key: "description", label: "Description" },
    { key: "messages", label: "Messages", num: true },
  ]);
  const refresh = async () => {
    const [u, v] = await Promise.all([api("/api/users"), api("/api/vhosts")]);
    users.set(u); vhosts.set(v);
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
    el("h1", {}, "Admin"), adminNav(""),
    el("h2", {}, "Users"), users.node, section("Add or update a user", addUser),
    el("h2", {}, "Virtual hosts"), vhosts.node, section("Add a virtual host", addVhost),
    section("Definitions", el("p", { class: "muted" }, "Users, vhosts, permissions, policies, exchanges, queues and bindings in RabbitMQ's JSON format."),
      exportButton, " ", file, importButton),
  );
  return refresh;
}
