// Routing, sign-in and the refresh timer. Pages live in views.js, objects.js, admin.js.
import { ApiError, api, credentials, signIn, signOut } from "./api.js";
import { permissionsPage } from "./access.js";
import { admin } from "./admin.js";
import { limitsPage } from "./limits.js";
import { parametersPage } from "./parameters.js";
import { policiesPage } from "./policies.js";
import { exchangePage, queuePage } from "./objects.js";
import { el } from "./table.js";
import * as views from "./views.js";
import { flash } from "./widgets.js";

const ROUTES = [
  [/^\/?$/, views.overview],
  [/^\/queues$/, views.queues],
  [/^\/queues\/([^/]+)\/([^/]+)$/, queuePage],
  [/^\/exchanges$/, views.exchanges],
  [/^\/exchanges\/([^/]+)\/([^/]+)$/, exchangePage],
  [/^\/connections$/, views.connections],
  [/^\/channels$/, views.channels],
  [/^\/consumers$/, views.consumers],
  [/^\/admin$/, admin],
  [/^\/admin\/permissions$/, permissionsPage],
  [/^\/admin\/limits$/, limitsPage],
  [/^\/admin\/policies$/, policiesPage],
  [/^\/admin\/parameters$/, parametersPage],
];
const main = document.getElementById("main");
let refresh = null;
let timer = null;
let generation = 0;

function refreshSeconds() { return Number(localStorage.getItem("roost.refresh") ?? "5"); }

function schedule() {
  clearTimeout(timer);
  const seconds = refreshSeconds();
  if (seconds > 0) timer = setTimeout(tick, seconds * 1000);
}

async function tick() {
  const mine = generation;
  try { if (refresh) await refresh(); } catch (e) { handle(e); }
  if (mine === generation) schedule();
}

function handle(e) {
  if (e instanceof ApiError && e.status === 401) { signOut(); showLogin("Please sign in again"); return; }
  flash(e.message, false);
}

function showLogin(message) {
  generation++;
  clearTimeout(timer);
  refresh = null;
  document.body.classList.add("signed-out");
  document.getElementById("whoami").textContent = "";
  const formNode = el("form", { "data-testid": "login" },
    el("label", {}, "Username", el("input", { name: "username", autocomplete: "username", required: true })),
    el("label", {}, "Password", el("input", { name: "password", type: "password", autocomplete: "current-password" })),
    el("button", { type: "submit" }, "Sign in"),
    message ? el("p", { class: "muted", "data-testid": "login-error" }, message) : null);
  formNode.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const f = new FormData(formNode);
    signIn(f.get("username"), f.get("password"));
    try {
      await start();
    } catch (e) {
      signOut();
      showLogin(e instanceof ApiError && e.status === 401 ? "Wrong username or password" : e.message);
    }
  });
  main.replaceChildren(el("div", { class: "login" }, el("h1", {}, "Sign in to Roost"), formNode));
}

async function start() {
  const me = await api("/api/whoami");
  document.body.classList.remove("signed-out");
  document.getElementById("whoami").textContent = `${me.name} (${me.tags.join(", ") || "no tags"})`;
  await route();
}

async function route() {
  if (!credentials()) { showLogin(); return; }
  const path = location.hash.replace(/^#/, "");
  const mine = ++generation;
  clearTimeout(timer);
  for (const a of document.querySelectorAll("#nav a")) {
    const href = a.getAttribute("href").slice(1);
    a.classList.toggle("active", href === "/" ? path === "/" || path === "" : path.startsWith(href));
  }
  for (const [pattern, view] of ROUTES) {
    const m = path.match(pattern);
    if (!m) continue;
    try {
      const fn = await view(main, m.slice(1).map(decodeURIComponent));
      if (mine !== generation) return;
      refresh = fn;
      await refresh();
    } catch (e) { handle(e); }
    if (mine === generation) schedule();
    return;
  }
  main.replaceChildren(el("h1", {}, "Not found"));
}

const select = document.getElementById("refresh");
select.value = String(refreshSeconds());
select.addEventListener("change", () => { localStorage.setItem("roost.refresh", select.value); schedule(); });
document.getElementById("logout").addEventListener("click", () => { signOut(); showLogin(); });
window.addEventListener("hashchange", () => { if (credentials()) route(); });
if (credentials()) start().catch((e) => { signOut(); showLogin(e.message); }); else showLogin();
