// The forecast page: read a long-format CSV, call POST /v1/forecast, draw the forecast as inline SVG, offer a CSV.
//
// Plain browser JavaScript with no dependencies and no build step, so the service ships it as a static file and
// works offline. The page does only what the API cannot: parse the CSV, infer each series' frequency (so the
// answer carries timestamps), draw, and write the download. Every number comes from the service.
"use strict";

(function () {
  const ID_COLUMNS = ["item_id", "unique_id", "id", "series", "series_id"];
  const TIME_COLUMNS = ["timestamp", "ds", "date", "time", "datetime"];
  const TARGET_COLUMNS = ["target", "y", "value", "values"];
  const MISSING = new Set(["", "nan", "na", "n/a", "null", "none"]);
  const LEVELS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9];
  const MAX_HISTORY_SHOWN = 400; // points of history drawn: at least 120 or five horizons, at most this
  const TIME_STEPS = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400,
    7 * 86400, 14 * 86400, 30 * 86400, 91 * 86400, 365 * 86400].map((s) => s * 1000);

  const $ = (id) => document.getElementById(id);
  const state = { series: [], answer: null };

  // ---------------------------------------------------------------------------------------------------------------
  // CSV

  /** Split CSV text into rows of fields (quotes, doubled quotes, CRLF); the delimiter is sniffed from line one. */
  function parseCsv(text) {
    const firstLine = text.split(/\r?\n/, 1)[0];
    const delimiter = [",", ";", "\t"].reduce((best, d) =>
      firstLine.split(d).length > firstLine.split(best).length ? d : best, ",");
    const rows = [];
    let row = [];
    let field = "";
    let quoted = false;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (quoted) {
        if (c === '"' && text[i + 1] === '"') { field += '"'; i++; }
        else if (c === '"') quoted = false;
        else field += c;
      } else if (c === '"') quoted = true;
      else if (c === delimiter) { row.push(field); field = ""; }
      else if (c === "\n" || c === "\r") {
        if (c === "\r" && text[i + 1] === "\n") i++;
        row.push(field); field = "";
        if (row.some((f) => f.trim() !== "")) rows.push(row);
        row = [];
      } else field += c;
    }
    row.push(field);
    if (row.some((f) => f.trim() !== "")) rows.push(row);
    return rows;
  }

  /** Normalise a timestamp to ISO 8601 and parse it as UTC milliseconds (naive stamps are read as UTC). */
  function parseTime(text) {
    let iso = text.trim().replace(" ", "T");
    if (!iso.includes("T")) iso += "T00:00:00";
    const hasZone = /(Z|[+-]\d\d:?\d\d)$/i.test(iso);
    const ms = Date.parse(hasZone ? iso : iso + "Z");
    return { iso, ms, hasZone };
  }

  /** Long-format CSV -> [{item_id, values, times (ms or null), starts}] in order of first appearance. */
  function readSeries(text) {
    const rows = parseCsv(text);
    if (rows.length < 2) throw new Error("the CSV needs a header line and at least one data row");
    const header = rows[0].map((h) => h.trim());
    const lower = header.map((h) => h.toLowerCase());
    const find = (names) => lower.findIndex((h) => names.includes(h));
    const idCol = find(ID_COLUMNS);
    const timeCol = find(TIME_COLUMNS);
    let targetCol = find(TARGET_COLUMNS);
    if (targetCol < 0) {
      const others = lower.map((_, i) => i).filter((i) => i !== idCol && i !== timeCol);
      if (others.length !== 1) {
        throw new Error(`no target column: name it one of ${TARGET_COLUMNS.join(", ")} (header: ${header.join(", ")})`);
      }
      targetCol = others[0];
    }
    const groups = new Map();
    rows.slice(1).forEach((row, k) => {
      const line = k + 2;
      const id = idCol >= 0 ? (row[idCol] || "").trim() : "series";
      const raw = (row[targetCol] || "").trim();
      let value = null;
      if (!MISSING.has(raw.toLowerCase())) {
        value = Number(raw);
        if (!Number.isFinite(value)) throw new Error(`line ${line}: target ${JSON.stringify(raw)} is not a number`);
      }
      let time = null;
      if (timeCol >= 0) {
        time = parseTime(row[timeCol] || "");
        if (Number.isNaN(time.ms)) throw new Error(`line ${line}: cannot read timestamp ${JSON.stringify(row[timeCol])}`);
      }
      if (!groups.has(id)) groups.set(id, []);
      groups.get(id).push({ value, time, line });
    });
    const series = [];
    for (const [id, points] of groups) {
      if (timeCol >= 0) {
        points.sort((a, b) => a.time.ms - b.time.ms);
        for (let i = 1; i < points.length; i++) {
          if (points[i].time.ms === points[i - 1].time.ms) {
            throw new Error(`series ${JSON.stringify(id)} has the timestamp ${points[i].time.iso} twice`);
          }
        }
      }
      series.push({
        item_id: id,
        values: points.map((p) => p.value),
        times: timeCol >= 0 ? points.map((p) => p.time.ms) : null,
        start: timeCol >= 0 ? points[0].time.iso : null,
      });
    }
    return series;
  }

  /** A pandas frequency alias for sorted UTC milliseconds, or null if the steps are irregular. */
  function inferFreq(times) {
    if (!times || times.length < 2) return null;
    const steps = new Set();
    for (let i = 1; i < times.length; i++) steps.add(times[i] - times[i - 1]);
    if (steps.size === 1) {
      const step = [...steps][0];
      const units = [[86400000, "D"], [3600000, "h"], [60000, "min"], [1000, "s"], [1, "ms"]];
      for (const [size, alias] of units) if (step % size === 0) return `${step / size}${alias}`;
    }
    const dates = times.map((t) => new Date(t));
    const monthly = dates.every((d, i) => i === 0 ||
      (d.getUTCFullYear() * 12 + d.getUTCMonth()) - (dates[i - 1].getUTCFullYear() * 12 + dates[i - 1].getUTCMonth()) === 1);
    const midnight = dates.every((d) => d.getUTCHours() === 0 && d.getUTCMinutes() === 0);
    if (monthly && midnight && dates.every((d) => d.getUTCDate() === 1)) return "MS";
    const monthEnd = (d) => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate() === d.getUTCDate();
    if (monthly && midnight && dates.every(monthEnd)) return "ME";
    return null;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The request

  async function onSubmit(event) {
    event.preventDefault();
    const horizon = Number($("horizon").value);
    if (!Number.isInteger(horizon) || horizon < 1) return showStatus("The horizon must be a whole number of steps, at least 1.", true);
    let series;
    try {
      series = readSeries($("csv-text").value);
    } catch (err) {
      return showStatus(`Cannot read the CSV: ${err.message}`, true);
    }
    const userFreq = $("freq").value.trim();
    const inputs = series.map((s) => {
      const input = { item_id: s.item_id, target: s.values };
      s.freq = userFreq || inferFreq(s.times);
      if (s.start && s.freq) { input.start = s.start; input.freq = s.freq; }
      return input;
    });
    const parameters = { prediction_length: horizon, quantile_levels: LEVELS };
    if ($("allow-negative").checked) parameters.infer_nonnegative = false;  // otherwise the model's own setting
    const body = { inputs, parameters };
    const headers = { "Content-Type": "application/json" };
    const key = $("api-key").value.trim();
    if (key) headers.Authorization = `Bearer ${key}`;

    $("submit").disabled = true;
    showStatus(`Forecasting ${series.length} series, ${horizon} steps…`);
    const started = performance.now();
    try {
      const response = await fetch("/v1/forecast", { method: "POST", headers, body: JSON.stringify(body) });
      const answer = await response.json().catch(() => ({}));
      if (!response.ok) return showStatus(describeError(response.status, answer, series), true);
      state.series = series;
      state.answer = answer;
      showResult();
      const seconds = ((performance.now() - started) / 1000).toFixed(2);
      const untimed = series.filter((s) => !s.freq).length;
      const note = untimed ? `; ${untimed} series without a regular frequency are drawn against step numbers` : "";
      showStatus(`Done: ${series.length} series × ${horizon} steps in ${seconds} s${note}.`);
    } catch (err) {
      showStatus(`The service did not answer: ${err.message}`, true);
    } finally {
      $("submit").disabled = false;
    }
  }

  /** One readable line per problem, naming the series instead of its index. */
  function describeError(status, answer, series) {
    if (status === 401) return "The service needs an API key: open “API key” and enter it.";
    if (status === 413) return `The CSV is too large for this service. ${answer.detail || ""}`;
    if (status === 422 && Array.isArray(answer.detail)) {
      return answer.detail.map((d) => {
        const loc = (d.loc || []).slice(1);
        if (loc[0] === "inputs" && Number.isInteger(loc[1]) && series[loc[1]]) {
          return `series ${JSON.stringify(series[loc[1]].item_id)}, ${loc.slice(2).join(".") || "series"}: ${d.msg}`;
        }
        return `${loc.join(".")}: ${d.msg}`;
      }).join("\n");
    }
    return `The service answered ${status}: ${typeof answer.detail === "string" ? answer.detail : "error"}`;
  }

  function showStatus(text, isError = false) {
    const el = $("status");
    el.textContent = text;
    el.classList.toggle("error", isError);
  }

  // ---------------------------------------------------------------------------------------------------------------
  // The result: series picker, plot, download

  function showResult() {
    const select = $("series-select");
    select.replaceChildren(...state.answer.predictions.map((p, i) => {
      const option = document.createElement("option");
      option.value = String(i);
      option.textContent = String(p.item_id);
      return option;
    }));
    $("warnings").replaceChildren(...(state.answer.warnings || []).map((w) => {
      const li = document.createElement("li");
      li.textContent = w;
      return li;
    }));
    const csv = forecastCsv(state.answer);
    const link = $("download");
    if (link.dataset.url) URL.revokeObjectURL(link.dataset.url);
    link.dataset.url = URL.createObjectURL(new Blob([csv], { type: "text/csv" }));
    link.href = link.dataset.url;
    $("result-panel").hidden = false;
    drawSeries(0);
  }

  /** The same columns as `tsfm forecast -o out.csv`: item_id, timestamp, median, one per level. */
  function forecastCsv(answer) {
    const levels = LEVELS.map(String).filter((q) => answer.predictions.length && q in answer.predictions[0]);
    const quote = (v) => (/[",\n]/.test(String(v)) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
    const lines = [["item_id", "timestamp", "median", ...levels].join(",")];
    for (const p of answer.predictions) {
      p.median.forEach((m, t) => {
        const stamp = p.timestamps ? p.timestamps[t].replace("T", " ") : String(t + 1);
        lines.push([quote(p.item_id), stamp, m, ...levels.map((q) => p[q][t])].join(","));
      });
    }
    return lines.join("\n") + "\n";
  }

  function drawSeries(index) {
    const s = state.series[index];
    const p = state.answer.predictions[index];
    const shown = Math.min(s.values.length, MAX_HISTORY_SHOWN, Math.max(120, 5 * p.median.length));
    const values = s.values.slice(-shown);
    const useTime = Boolean(p.timestamps && s.times);
    const histX = useTime ? s.times.slice(-shown) : values.map((_, i) => i - values.length + 1);
    const foreX = useTime ? p.timestamps.map((t) => parseTime(t).ms) : p.median.map((_, i) => i + 1);
    $("plot-container").replaceChildren(plotSvg({ histX, values, foreX, p, useTime }));
  }

  // ---------------------------------------------------------------------------------------------------------------
  // SVG plot

  const SVG = "http://www.w3.org/2000/svg";
  function el(name, attrs, text) {
    const node = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  /** Round tick values: 1, 2 or 5 times a power of ten. */
  function niceTicks(lo, hi, count) {
    if (!(hi > lo)) { hi = lo + 1; lo -= 1; }
    const raw = (hi - lo) / count;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(Number(v.toPrecision(12)));
    return ticks;
  }

  /** Ticks on round UTC times (whole hours, days, weeks), at most `count` of them. */
  function timeTicks(lo, hi, count) {
    const step = TIME_STEPS.find((s) => (hi - lo) / s <= count) || (hi - lo) / count;
    const ticks = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi; v += step) ticks.push(v);
    return ticks;
  }

  function formatTime(ms, spanMs) {
    const iso = new Date(ms).toISOString();
    if (spanMs > 3 * 86400000) return iso.slice(0, 10);
    return iso.slice(5, 16).replace("T", " ");
  }

  function plotSvg({ histX, values, foreX, p, useTime }) {
    const W = 900, H = 380, m = { top: 16, right: 20, bottom: 36, left: 64 };
    const lower = p["0.1"] || p.median, upper = p["0.9"] || p.median;
    const ys = [...values.filter((v) => v !== null), ...lower, ...upper, ...p.median];
    const xs = [...histX, ...foreX];
    let [yLo, yHi] = [Math.min(...ys), Math.max(...ys)];
    const pad = (yHi - yLo) * 0.05 || Math.abs(yHi) * 0.05 || 1;
    yLo -= pad; yHi += pad;
    const [xLo, xHi] = [Math.min(...xs), Math.max(...xs)];
    const sx = (x) => m.left + ((x - xLo) / (xHi - xLo || 1)) * (W - m.left - m.right);
    const sy = (y) => H - m.bottom - ((y - yLo) / (yHi - yLo)) * (H - m.top - m.bottom);

    const svg = el("svg", { id: "plot", viewBox: `0 0 ${W} ${H}`, role: "img",
      "aria-label": `forecast of series ${p.item_id}` });
    const grid = el("g", { class: "grid" });
    const axis = el("g", { class: "axis" });
    for (const v of niceTicks(yLo, yHi, 6)) {
      grid.append(el("line", { x1: m.left, x2: W - m.right, y1: sy(v), y2: sy(v) }));
      axis.append(el("text", { x: m.left - 6, y: sy(v) + 4, "text-anchor": "end" }, v.toLocaleString("en")));
    }
    const xTicks = useTime ? timeTicks(xLo, xHi, 7) : niceTicks(xLo, xHi, 8);
    for (const v of xTicks) {
      const label = useTime ? formatTime(v, xHi - xLo) : String(v);
      const anchor = sx(v) > W - m.right - 40 ? "end" : "middle"; // keep the last label inside the frame
      axis.append(el("text", { x: sx(v), y: H - m.bottom + 18, "text-anchor": anchor }, label));
    }
    axis.append(el("line", { x1: m.left, x2: W - m.right, y1: H - m.bottom, y2: H - m.bottom }));
    axis.append(el("line", { x1: m.left, x2: m.left, y1: m.top, y2: H - m.bottom }));
    svg.append(grid, axis);

    const band = (lo, hi, cls) => {
      if (!lo || !hi) return;
      const top = foreX.map((x, i) => `${sx(x)},${sy(hi[i])}`);
      const bottom = foreX.map((x, i) => `${sx(x)},${sy(lo[i])}`).reverse();
      svg.append(el("path", { class: cls, d: `M${top.join("L")}L${bottom.join("L")}Z` }));
    };
    band(p["0.1"], p["0.9"], "band-outer");
    band(p["0.2"], p["0.8"], "band-inner");

    let d = "", pen = "M";
    values.forEach((v, i) => {
      if (v === null) { pen = "M"; return; }
      d += `${pen}${sx(histX[i])},${sy(v)}`;
      pen = "L";
    });
    if (d) svg.append(el("path", { class: "history", d }));
    svg.append(el("path", { class: "median", d: "M" + foreX.map((x, i) => `${sx(x)},${sy(p.median[i])}`).join("L") }));
    const cut = sx(foreX[0]);
    svg.append(el("line", { class: "divider", x1: cut, x2: cut, y1: m.top, y2: H - m.bottom }));
    return svg;
  }

  // ---------------------------------------------------------------------------------------------------------------
  // Example data and wiring

  function exampleCsv() {
    const lines = ["item_id,timestamp,target"];
    const start = Date.UTC(2024, 0, 1);
    [["north", 20, 0], ["south", 35, 5]].forEach(([id, level, phase]) => {
      for (let t = 0; t < 24 * 14; t++) {
        const stamp = new Date(start + t * 3600000).toISOString().slice(0, 16).replace("T", " ");
        const value = level + 6 * Math.sin((2 * Math.PI * (t + phase)) / 24) + 0.02 * t + 1.5 * Math.sin(t * 1.7);
        lines.push(`${id},${stamp},${value.toFixed(2)}`);
      }
    });
    return lines.join("\n") + "\n";
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("forecast-form").addEventListener("submit", onSubmit);
    $("series-select").addEventListener("change", (e) => drawSeries(Number(e.target.value)));
    $("example-button").addEventListener("click", () => { $("csv-text").value = exampleCsv(); });
    $("csv-file").addEventListener("change", async (e) => {
      const file = e.target.files[0];
      if (!file) return;
      $("csv-text").value = await file.text();
      showStatus(`Read ${file.name} (${file.size.toLocaleString("en")} bytes).`);
    });
  });
})();
