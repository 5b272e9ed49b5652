// A sortable, filterable table that keeps its sort and filter across refreshes.
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "dataset") Object.assign(node.dataset, v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) node.setAttribute(k, v === true ? "" : v);
  }
  node.append(...children.flat().filter((c) => c !== null && c !== undefined));
  return node;
}

export function fmt(v) {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "✓" : "";
  if (typeof v === "number") return Number.isInteger(v) ? v.toLocaleString() : v.toFixed(1);
  if (Array.isArray(v)) return v.join(", ");
  if (typeof v === "object") return Object.keys(v).length ? JSON.stringify(v) : "";
  return String(v);
}

export function pick(row, path) {
  return path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), row);
}

export class Table {
  // columns: [{key, label, num?, link?(row) -> href}]
  constructor(name, columns) {
    this.name = name;
    this.columns = columns;
    this.sort = null;
    this.desc = false;
    this.filter = "";
    this.rows = [];
    this.input = el("input", {
      class: "filter", placeholder: "Filter by name", "data-testid": `${name}-filter`,
      oninput: () => { this.filter = this.input.value.toLowerCase(); this.render(); },
    });
    this.table = el("table", { "data-testid": `${name}-table` });
    this.node = el("div", {}, this.input, this.table);
  }

  set(rows) { this.rows = rows || []; this.render(); }

  render() {
    let rows = this.rows.filter((r) => !this.filter || String(r.name ?? r.consumer_tag ?? r.user ?? r.vhost ?? "").toLowerCase().includes(this.filter));
    if (this.sort) {
      const key = this.sort, sign = this.desc ? -1 : 1;
      rows = [...rows].sort((a, b) => {
        const x = pick(a, key), y = pick(b, key);
        if (x === y) return 0;
        if (x === undefined || x === null) return -sign;
        if (y === undefined || y === null) return sign;
        return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * sign;
      });
    }
    const head = el("tr", {}, this.columns.map((c) => el("th", {
      class: [c.num ? "num" : "", this.sort === c.key ? "sorted" : "", this.sort === c.key && this.desc ? "desc" : ""].join(" ").trim() || undefined,
      onclick: () => { this.desc = this.sort === c.key ? !this.desc : false; this.sort = c.key; this.render(); },
    }, c.label)));
    const body = rows.map((r) => el("tr", {}, this.columns.map((c) => {
      const text = c.format ? c.format(pick(r, c.key), r) : fmt(pick(r, c.key));
      const content = c.link ? el("a", { href: c.link(r) }, text) : text;
      return el("td", { class: c.num ? "num" : undefined, "data-col": c.key }, content);
    })));
    if (!rows.length) body.push(el("tr", {}, el("td", { colspan: this.columns.length, class: "muted" }, "Nothing to show")));
    this.table.replaceChildren(el("thead", {}, head), el("tbody", {}, body));
  }
}
