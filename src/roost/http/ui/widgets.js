// Small building blocks shared by the pages.
import { api, seg } from "./api.js";
import { LineChart } from "./chart.js";
import { el, fmt } from "./table.js";

export const vq = (r) => `${seg(r.vhost)}/${seg(r.name)}`;
export const rate = (row, name) => row?.message_stats?.[`${name}_details`]?.rate ?? 0;
let flashTimer = null;

export function flash(text, ok = true) {
  const box = document.getElementById("flash");
  box.replaceChildren(el("div", { class: ok ? "ok" : "err", "data-testid": "flash" }, text));
  clearTimeout(flashTimer);
  flashTimer = setTimeout(() => box.replaceChildren(), 6000);
}

export async function attempt(action, done) {
  try { await action(); if (done) flash(done); } catch (e) { flash(e.message, false); }
}

export function stat(label, testid) {
  const value = el("b", { "data-testid": testid }, "–");
  return { node: el("div", { class: "stat" }, value, el("span", {}, label)), set: (v) => { value.textContent = fmt(v); } };
}

export function chartCard(title, series, testid) {
  const canvas = el("canvas", { "data-testid": testid });
  const legend = el("div", { class: "legend" });
  const card = el("section", { class: "card" }, el("h2", {}, title), legend, canvas);
  return { node: card, chart: new LineChart(canvas, legend, series) };
}

export async function vhostSelect(name = "vhost") {
  const vhosts = await api("/api/vhosts");
  return el("select", { name }, vhosts.map((v) => el("option", { value: v.name }, v.name)));
}

export function field(label, input) { return el("label", {}, label, input); }


export async function userSelect(name = "user") {
  const users = await api("/api/users");
  return el("select", { name }, users.map((u) => el("option", { value: u.name }, u.name)));
}

// A form whose submit calls submit(FormData); testid names it for the tests.
export function form(testid, fields, label, submit) {
  const node = el("form", { class: "inline", "data-testid": testid }, ...fields, el("button", { type: "submit" }, label));
  node.addEventListener("submit", (ev) => { ev.preventDefault(); submit(new FormData(node)); });
  return node;
}

export function section(title, ...children) { return el("section", { class: "card" }, el("h2", {}, title), ...children); }

// A table column with a button per row (Clear, Delete), confirmed first.
export function actionColumn(label, testid, question, action) {
  return {
    key: "_action", label: "",
    format: (_, row) => el("button", {
      type: "button", class: "danger small", "data-testid": testid,
      onclick: () => { if (confirm(question(row))) action(row); },
    }, label),
  };
}

// The admin pages' sub-navigation, as RabbitMQ's admin tab has.
export function adminNav(current) {
  const pages = [["", "Users and vhosts"], ["/permissions", "Permissions"], ["/limits", "Limits"],
    ["/policies", "Policies"], ["/parameters", "Parameters"]];
  return el("nav", { class: "subnav", "data-testid": "admin-nav" }, pages.map(([path, label]) =>
    el("a", { href: `#/admin${path}`, class: path === current ? "active" : undefined }, label)));
}

// JSON typed by a person: an error they can read instead of a stack trace.
export function parseJSON(text, what) {
  try { return JSON.parse(text); } catch { throw new Error(`${what} is not valid JSON: ${text}`); }
}
