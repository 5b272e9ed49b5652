// The management API from the browser: basic auth from the session, JSON in and out.
const KEY = "roost.auth";

export function credentials() { return sessionStorage.getItem(KEY); }
export function signIn(user, password) { sessionStorage.setItem(KEY, btoa(`${user}:${password}`)); }
export function signOut() { sessionStorage.removeItem(KEY); }

export class ApiError extends Error {
  constructor(status, reason) { super(reason); this.status = status; }
}

export const seg = (s) => encodeURIComponent(s);

export async function api(path, { method = "GET", body, headers = {} } = {}) {
  const auth = credentials();
  const init = { method, headers: { ...headers, Accept: "application/json" } };
  if (auth) init.headers.Authorization = `Basic ${auth}`;
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = typeof body === "string" ? body : JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  const text = await resp.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = text; } }
  if (!resp.ok) {
    throw new ApiError(resp.status, (data && data.reason) || resp.statusText);
  }
  return data;
}
