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

