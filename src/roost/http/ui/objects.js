// The queue page and the exchange page: figures, bindings, consumers and the forms.
import { api, seg } from "./api.js";
import { Table, el } from "./table.js";
import { attempt, chartCard, field, flash, rate, stat } from "./widgets.js";

function publishForm(testid, exchange, routingKey) {
  return el("form", { class: "inline", "data-testid": testid },
    field("Routing key", el("input", { name: "routing_key", value: routingKey })),
    field("Delivery mode", el("select", { name: "delivery_mode" },
      el("option", { value: "1" }, "1 - non-persistent"), el("option", { value: "2" }, "2 - persistent"))),
    field("Headers (JSON)", el("input", { name: "headers", placeholder: '{"k": "v"}' })),
    field("Payload", el("textarea", { name: "payload", rows: 2, cols: 40 })),
    el("button", { type: "submit" }, "Publish message"));
}

function onPublish(form, vhost, exchange, after) {
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    attempt(async () => {
      const properties = { delivery_mode: Number(f.get("delivery_mode")) };
      if (f.get("headers")) properties.headers = JSON.parse(f.get("headers"));
      const res = await api(`/api/exchanges/${seg(vhost)}/${seg(exchange || "amq.default")}/publish`, {
        method: "POST",
        body: { routing_key: f.get("routing_key"), payload: f.get("payload"), payload_encoding: "string", properties },
      });
      flash(res.routed ? "Message published" : "Message published, but not routed to any queue", res.routed);
      await after();
    });
  });
}

const bindingColumns = [
  { key: "source", label: "From", format: (v) => v || "(default exchange)" },
  { key: "destination", label: "To" }, { key: "destination_type", label: "Kind" },
  { key: "routing_key", label: "Routing key" }, { key: "arguments", label: "Arguments" },
];

export async function queuePage(main, [vhost, name]) {
  const path = `/api/queues/${seg(vhost)}/${seg(name)}`;
  const tiles = {
    ready: stat("Ready", "queue-ready"), unacked: stat("Unacked", "queue-unacked"),
    total: stat("Total", "queue-total"), consumers: stat("Consumers", "queue-consumers"),
    publish: stat("Publish /s", "queue-rate-publish"), deliver: stat("Deliver /s", "queue-rate-deliver"),
  };
  const chart = chartCard("Queue depth and rates", [
    { name: "messages", label: "Messages" }, { name: "publish", label: "Publish /s" }, { name: "deliver_get", label: "Deliver /s" },
  ], "queue-chart");
  const bindings = new Table("queue-bindings", bindingColumns);
  const consumers = new Table("queue-consumers", [
    { key: "consumer_tag", label: "Tag" }, { key: "channel_details.name", label: "Channel" },
    { key: "ack_required", label: "Ack required" }, { key: "prefetch_count", label: "Prefetch", num: true },
  ]);
  // a cluster's replicated quorum queue or stream: its leader, every member, which are in sync
  const replicas = new Table("queue-replicas", [
    { key: "node", label: "Node" }, { key: "role", label: "Role" }, { key: "online", label: "Online (in sync)" },
  ]);
  const leader = el("p", { class: "muted", "data-testid": "queue-leader" });
  const replicaCard = el("section", { class: "card", hidden: true }, el("h2", {}, "Replicas"), leader, replicas.node);
  const pub = publishForm("queue-publish", "", name);
  const getForm = el("form", { class: "inline", "data-testid": "queue-get" },
    field("Ack mode", el("select", { name: "ackmode" },
      el("option", { value: "ack_requeue_true" }, "Nack, requeue (peek)"),
      el("option", { value: "ack_requeue_false" }, "Ack, remove"),
      el("option", { value: "reject_requeue_false" }, "Reject, drop"))),
    field("Messages", el("input", { name: "count", type: "number", value: "1", min: "1" })),
    el("button", { type: "submit" }, "Get messages"));
  const got = el("div", { "data-testid": "queue-messages" });
  const purge = el("button", { type: "button", class: "secondary", "data-testid": "queue-purge" }, "Purge messages");
  const del = el("button", { type: "button", class: "danger", "data-testid": "queue-delete" }, "Delete queue");
  main.replaceChildren(
    el("h1", {}, `Queue ${name}`, el("span", { class: "muted" }, ` in ${vhost}`)),
    el("div", { class: "stats" }, Object.values(tiles).map((t) => t.node)),
    chart.node,
    replicaCard,
    el("h2", {}, "Bindings"), bindings.node,
    el("h2", {}, "Consumers"), consumers.node,
    el("section", { class: "card" }, el("h2", {}, "Publish message"), pub),
    el("section", { class: "card" }, el("h2", {}, "Get messages"), getForm, got),
    el("section", { class: "card" }, el("h2", {}, "Purge / delete"), purge, " ", del),
  );
  const refresh = async () => {
    const q = await api(path);
    tiles.ready.set(q.messages_ready); tiles.unacked.set(q.messages_unacknowledged);
    tiles.total.set(q.messages); tiles.consumers.set(q.consumers);
    tiles.publish.set(rate(q, "publish")); tiles.deliver.set(rate(q, "deliver_get"));
    chart.chart.push(Date.now(), { messages: q.messages, publish: rate(q, "publish"), deliver_get: rate(q, "deliver_get") });
    consumers.set(q.consumer_details);
    replicaCard.hidden = !q.members;
    if (q.members) {
      leader.textContent = `Leader ${q.leader}: ${q.online.length} of ${q.members.length} members online`;
      replicas.set(q.members.map((n) => ({
        node: n, role: n === q.leader ? "leader" : "follower", online: q.online.includes(n) ? "yes" : "no",
      })));
    }
    bindings.set(await api(`${path}/bindings`));
  };
  onPublish(pub, vhost, "", refresh);
  getForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(getForm);
    attempt(async () => {
      const msgs = await api(`${path}/get`, { method: "POST", body: { count: Number(f.get("count")), ackmode: f.get("ackmode"), encoding: "auto", truncate: 50000 } });
      got.replaceChildren(...(msgs.length ? msgs.map((m, i) => el("div", { class: "message" },
        el("div", { class: "muted" }, `Message ${i + 1}: exchange "${m.exchange}", routing key "${m.routing_key}", redelivered ${m.redelivered}, ${m.message_count} left`),
        el("pre", { class: "payload", "data-testid": "payload" }, m.payload))) : [el("p", { class: "muted" }, "Queue is empty")]));
      await refresh();
    });
  });
  purge.addEventListener("click", () => attempt(async () => { await api(`${path}/contents`, { method: "DELETE" }); await refresh(); }, "Queue purged"));
  del.addEventListener("click", () => attempt(async () => { await api(path, { method: "DELETE" }); location.hash = "#/queues"; }, "Queue deleted"));
  return refresh;
}

export async function exchangePage(main, [vhost, name]) {
  const real = name === "amq.default" ? "" : name;
  const path = `/api/exchanges/${seg(vhost)}/${seg(name)}`;
  const info = el("p", { class: "muted", "data-testid": "exchange-info" });
  const inRate = stat("In /s", "exchange-rate-in"), outRate = stat("Out /s", "exchange-rate-out");
  const bindings = new Table("exchange-bindings", bindingColumns);
  const pub = publishForm("exchange-publish", real, "");
  main.replaceChildren(
    el("h1", {}, `Exchange ${real || "(AMQP default)"}`, el("span", { class: "muted" }, ` in ${vhost}`)),
    info, el("div", { class: "stats" }, inRate.node, outRate.node),
    el("h2", {}, "Bindings from this exchange"), bindings.node,
    el("section", { class: "card" }, el("h2", {}, "Publish message"), pub),
  );
  const refresh = async () => {
    const x = await api(path);
    info.textContent = `type ${x.type}, ${x.durable ? "durable" : "transient"}${x.auto_delete ? ", auto-delete" : ""}${x.internal ? ", internal" : ""}`;
    inRate.set(rate(x, "publish_in")); outRate.set(rate(x, "publish_out"));
    bindings.set(await api(`${path}/bindings/source`));
  };
  onPublish(pub, vhost, real, refresh);
  return refresh;
}
