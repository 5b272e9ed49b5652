// One function per page. Each builds its DOM once and returns refresh(), which the
// app calls on a timer; data only ever reaches the page through textContent.
import { api, seg } from "./api.js";
import { gaugeFromSamples, ratesFromSamples } from "./chart.js";
import { Table, el } from "./table.js";
import { attempt, chartCard, field, stat, vhostSelect, vq } from "./widgets.js";

// -- overview ------------------------------------------------------------------------------

export async function overview(main) {
  const tiles = {
    connections: stat("Connections", "total-connections"), channels: stat("Channels", "total-channels"),
    queues: stat("Queues", "total-queues"), consumers: stat("Consumers", "total-consumers"),
    ready: stat("Ready", "total-ready"), unacked: stat("Unacked", "total-unacked"),
    publish: stat("Publish /s", "rate-publish"), deliver: stat("Deliver /s", "rate-deliver"),
  };
  const rates = chartCard("Message rates", [
    { name: "publish", label: "Publish" }, { name: "deliver_get", label: "Deliver / get" }, { name: "ack", label: "Ack" },
  ], "chart-rates");
  const depth = chartCard("Queued messages", [
    { name: "messages_ready", label: "Ready" }, { name: "messages_unacknowledged", label: "Unacked" },
  ], "chart-depth");
  const listeners = new Table("listeners", [
    { key: "protocol", label: "Protocol" }, { key: "ip_address", label: "Bound to" }, { key: "port", label: "Port", num: true, format: (v) => String(v) },  // a port, not "50,419"
  ]);
  main.replaceChildren(
    el("h1", {}, "Overview"),
    el("div", { class: "stats" }, Object.values(tiles).map((t) => t.node)),
    el("div", { class: "charts" }, rates.node, depth.node),
    el("h2", {}, "Listeners"), listeners.node,
  );
  return async () => {
    const o = await api("/api/overview?lengths_age=600&lengths_incr=5&msg_rates_age=600&msg_rates_incr=5");
    const t = o.object_totals, q = o.queue_totals, m = o.message_stats;
    tiles.connections.set(t.connections); tiles.channels.set(t.channels);
    tiles.queues.set(t.queues); tiles.consumers.set(t.consumers);
    tiles.ready.set(q.messages_ready); tiles.unacked.set(q.messages_unacknowledged);
    tiles.publish.set(m.publish_details.rate); tiles.deliver.set(m.deliver_get_details.rate);
    rates.chart.set({
      publish: ratesFromSamples(m.publish_details.samples),
      deliver_get: ratesFromSamples(m.deliver_get_details.samples),
      ack: ratesFromSamples(m.ack_details.samples),
    });
    depth.chart.set({
      messages_ready: gaugeFromSamples(q.messages_ready_details.samples),
      messages_unacknowledged: gaugeFromSamples(q.messages_unacknowledged_details.samples),
    });
    listeners.set(o.listeners);
  };
}

// -- lists ---------------------------------------------------------------------------------

function listPage(main, title, path, name, columns, extra = []) {
  const table = new Table(name, columns);
  main.replaceChildren(el("h1", {}, title), ...extra, table.node);
  return async () => table.set(await api(path));
}

export async function queues(main) {
  const form = el("form", { class: "inline", "data-testid": "declare-queue" },
    field("Virtual host", await vhostSelect()),
    field("Name", el("input", { name: "name", required: true })),
    field("Durable", el("select", { name: "durable" }, el("option", { value: "true" }, "durable"), el("option", { value: "false" }, "transient"))),
    el("button", { type: "submit" }, "Add queue"));
  const refresh = listPage(main, "Queues", "/api/queues", "queues", [
    { key: "vhost", label: "Vhost" },
    { key: "name", label: "Name", link: (r) => `#/queues/${vq(r)}` },
    { key: "type", label: "Type" },
    { key: "durable", label: "Durable" },
    { key: "messages_ready", label: "Ready", num: true },
    { key: "messages_unacknowledged", label: "Unacked", num: true },
    { key: "consumers", label: "Consumers", num: true },
    { key: "message_stats.publish_details.rate", label: "Publish /s", num: true },
    { key: "message_stats.deliver_get_details.rate", label: "Deliver /s", num: true },
  ], [el("section", { class: "card" }, el("h2", {}, "Add a queue"), form)]);
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    attempt(async () => {
      await api(`/api/queues/${seg(f.get("vhost"))}/${seg(f.get("name"))}`, { method: "PUT", body: { durable: f.get("durable") === "true" } });
      await refresh();
    }, `Queue ${f.get("name")} declared`);
  });
  return refresh;
}

export async function exchanges(main) {
  return listPage(main, "Exchanges", "/api/exchanges", "exchanges", [
    { key: "vhost", label: "Vhost" },
    { key: "name", label: "Name", link: (r) => `#/exchanges/${seg(r.vhost)}/${seg(r.name || "amq.default")}`, format: (v) => v || "(AMQP default)" },
    { key: "type", label: "Type" }, { key: "durable", label: "Durable" },
    { key: "auto_delete", label: "Auto-delete" }, { key: "internal", label: "Internal" },
    { key: "message_stats.publish_in_details.rate", label: "In /s", num: true },
  ]);
}

export async function connections(main) {
  return listPage(main, "Connections", "/api/connections", "connections", [
    { key: "name", label: "Name" }, { key: "user_provided_name", label: "Client name" },
    { key: "user", label: "User" }, { key: "vhost", label: "Vhost" }, { key: "protocol", label: "Protocol" },
    { key: "channels", label: "Channels", num: true },
    { key: "recv_oct_details.rate", label: "From client B/s", num: true },
    { key: "send_oct_details.rate", label: "To client B/s", num: true },
  ]);
}

export async function channels(main) {
  return listPage(main, "Channels", "/api/channels", "channels", [
    { key: "name", label: "Name" }, { key: "user", label: "User" }, { key: "vhost", label: "Vhost" },
    { key: "consumer_count", label: "Consumers", num: true },
    { key: "prefetch_count", label: "Prefetch", num: true },
    { key: "messages_unacknowledged", label: "Unacked", num: true }, { key: "state", label: "State" },
  ]);
}

export async function consumers(main) {
  return listPage(main, "Consumers", "/api/consumers", "consumers", [
    { key: "queue.vhost", label: "Vhost" },
    { key: "queue.name", label: "Queue", link: (r) => `#/queues/${seg(r.queue.vhost)}/${seg(r.queue.name)}` },
    { key: "consumer_tag", label: "Tag" }, { key: "channel_details.name", label: "Channel" },
    { key: "ack_required", label: "Ack required" }, { key: "prefetch_count", label: "Prefetch", num: true },
  ]);
}
