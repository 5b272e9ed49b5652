// A small time-series line chart on canvas: no library, redrawn on every refresh.
export const COLORS = ["#d4590b", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b"];

export class LineChart {
  constructor(canvas, legend, series) {
    this.canvas = canvas;
    this.series = series; // [{name, label}]
    this.points = Object.fromEntries(series.map((s) => [s.name, []]));
    legend.replaceChildren(...series.map((s, i) => {
      const span = document.createElement("span");
      const dot = document.createElement("i");
      dot.style.background = COLORS[i % COLORS.length];
      span.append(dot, s.label);
      return span;
    }));
  }

  // points: {name: [[ms, value], ...]} oldest first; replaces what is shown
  set(points) {
    for (const s of this.series) this.points[s.name] = points[s.name] || [];
    this.draw();
  }

  // one new point per series, keeping the last `keep`
  push(ms, values, keep = 120) {
    for (const s of this.series) {
      const list = this.points[s.name];
      list.push([ms, values[s.name] || 0]);
      if (list.length > keep) list.shift();
    }
    this.draw();
  }

  draw() {
    const c = this.canvas, dpr = window.devicePixelRatio || 1;
    const w = c.clientWidth || 400, h = c.clientHeight || 180;
    c.width = w * dpr; c.height = h * dpr;
    const g = c.getContext("2d");
    g.scale(dpr, dpr);
    g.clearRect(0, 0, w, h);
    const all = this.series.flatMap((s) => this.points[s.name]);
    const pad = { l: 48, r: 8, t: 8, b: 18 };
    let max = Math.max(1, ...all.map((p) => p[1]));
    const t0 = Math.min(...all.map((p) => p[0])), t1 = Math.max(...all.map((p) => p[0]));
    g.strokeStyle = "#d9dee3"; g.fillStyle = "#66717d"; g.font = "11px system-ui";
    for (let i = 0; i <= 4; i++) {
      const y = pad.t + (h - pad.t - pad.b) * (i / 4);
      g.beginPath(); g.moveTo(pad.l, y); g.lineTo(w - pad.r, y); g.stroke();
      const v = max * (1 - i / 4);
      g.fillText(v >= 100 ? v.toFixed(0) : v.toFixed(1), 4, y + 4);
    }
    if (!all.length) { g.fillText("waiting for samples…", pad.l + 8, h / 2); return; }
    const span = Math.max(1, t1 - t0);
    const x = (t) => pad.l + (w - pad.l - pad.r) * ((t - t0) / span);
    const y = (v) => pad.t + (h - pad.t - pad.b) * (1 - v / max);
    this.series.forEach((s, i) => {
      const pts = this.points[s.name];
      if (!pts.length) return;
      g.strokeStyle = COLORS[i % COLORS.length]; g.lineWidth = 2;
      g.beginPath();
      pts.forEach(([t, v], j) => (j ? g.lineTo(x(t), y(v)) : g.moveTo(x(t), y(v))));
      g.stroke();
    });
    g.fillStyle = "#66717d";
    g.fillText(new Date(t1).toLocaleTimeString(), w - pad.r - 60, h - 4);
  }
}

// RabbitMQ samples are cumulative counters, newest first: turn them into rates
export function ratesFromSamples(samples) {
  const out = [];
  const pts = [...(samples || [])].reverse();
  for (let i = 1; i < pts.length; i++) {
    const dt = (pts[i].timestamp - pts[i - 1].timestamp) / 1000;
    if (dt > 0) out.push([pts[i].timestamp, Math.max(0, (pts[i].sample - pts[i - 1].sample) / dt)]);
  }
  return out;
}

export function gaugeFromSamples(samples) {
  return [...(samples || [])].reverse().map((s) => [s.timestamp, s.sample]);
}
