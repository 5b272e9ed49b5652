// Admin › Policies: user policies and operator policies (RabbitMQ's /api/policies and
// /api/operator-policies), listed, set and deleted.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { actionColumn, adminNav, attempt, field, form, parseJSON, section, vhostSelect } from "./widgets.js";

async function policyKind(kind, noun, applyTo, example) {
  let refresh = null;
  const remove = (r) => attempt(async () => {
    await api(`/api/${kind}/${seg(r.vhost)}/${seg(r.name)}`, { method: "DELETE" });
    await refresh();
  }, `${noun} ${r.name} deleted`);
  const table = new Table(kind, [
    { key: "vhost", label: "Virtual host" }, { key: "name", label: "Name" }, { key: "pattern", label: "Pattern" },
    { key: "apply-to", label: "Apply to" }, { key: "definition", label: "Definition" },
    { key: "priority", label: "Priority", num: true },
    actionColumn("Delete", `delete-${kind}`, (r) => `Delete ${noun.toLowerCase()} ${r.name}?`, remove),
  ]);
  refresh = async () => table.set(await api(`/api/${kind}`));
  const add = form(`add-${kind}`, [
    field("Virtual host", await vhostSelect()),
    field("Name", el("input", { name: "name", required: true })),
    field("Pattern", el("input", { name: "pattern", value: ".*" })),
    field("Apply to", el("select", { name: "apply-to" }, applyTo.map((v) => el("option", { value: v }, v)))),
    field("Definition (JSON)", el("input", { name: "definition", value: example, size: 34 })),
    field("Priority", el("input", { name: "priority", type: "number", value: "0" })),
  ], `Add ${noun.toLowerCase()}`, (f) => attempt(async () => {
    await api(`/api/${kind}/${seg(f.get("vhost"))}/${seg(f.get("name"))}`, {
      method: "PUT",
      body: {
        pattern: f.get("pattern"), "apply-to": f.get("apply-to"),
        definition: parseJSON(f.get("definition"), "The definition"), priority: Number(f.get("priority")),
      },
    });
    await refresh();
  }, `${noun} ${f.get("name")} saved`));
  return { table, add, refresh: () => refresh() };
}

export async function policiesPage(main) {
  const user = await policyKind("policies", "Policy",
    ["all", "queues", "exchanges", "classic_queues", "quorum_queues", "streams"], '{"max-length": 1000}');
  const operator = await policyKind("operator-policies", "Operator policy",
    ["queues", "classic_queues", "quorum_queues", "streams"], '{"max-length-bytes": 1073741824}');
  main.replaceChildren(
    el("h1", {}, "Admin"), adminNav("/policies"),
    el("h2", {}, "Policies"), user.table.node, section("Add or update a policy", user.add),
    el("h2", {}, "Operator policies"),
    el("p", { class: "muted" }, "Set by operators over what users' policies say: where both set a limit "
      + "(max-length, max-length-bytes, message-ttl, expires, delivery-limit) the lower one applies."),
    operator.table.node, section("Add or update an operator policy", operator.add),
  );
  return async () => { await Promise.all([user.refresh(), operator.refresh()]); };
}
