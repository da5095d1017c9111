// The dashboard's script: the page is loaded once; the event stream (/api/v1/events) sends an update
// every few seconds, whose sections replace the page's (never the controls), and whose data the charts
// are drawn from (TradingView Lightweight Charts, bundled into the binary). The controls post with fetch
// and show the answer beside the form. window.tradebot says what was drawn (the browser test reads it).
(function () {
  "use strict";
  const LWC = window.LightweightCharts;
  const state = { updates: 0, seq: -1, charts: {}, sections: {} };
  window.tradebot = state;
  const usd = new Intl.NumberFormat("en-US", { style: "currency", currency: "USD" });
  const money = (v) => usd.format(v);
  const pct = (v) => (v * 100).toFixed(1) + "%";
  const pad = (n) => String(n).padStart(2, "0");
  let daily = true;

  // Times: business days ("2013-01-02") for daily bars, UTC seconds otherwise.
  function chartTime(iso) {
    const d = new Date(iso);
    if (daily) return d.getUTCFullYear() + "-" + pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate());
    return Math.floor(d.getTime() / 1000);
  }
  function timeText(t) {
    if (typeof t === "string") return t;
    if (typeof t === "object") return t.year + "-" + pad(t.month) + "-" + pad(t.day);
    const d = new Date(t * 1000);
    return d.toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }
  // The time axis' labels: the year, "Mar 2013" or "Mar 4" for dates; the time of day to the second.
  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  function tick(t, type) {
    let y, m, d;
    if (typeof t === "object") [y, m, d] = [t.year, t.month, t.day];
    else if (typeof t === "string") [y, m, d] = t.split("-").map(Number);
    else {
      const x = new Date(t * 1000);
      if (type >= 3) return x.toISOString().slice(11, 19);
      [y, m, d] = [x.getUTCFullYear(), x.getUTCMonth() + 1, x.getUTCDate()];
    }
    if (type === 0) return String(y);
    if (type === 1) return MONTHS[m - 1] + " " + y;
    return MONTHS[m - 1] + " " + d;
  }
  const key = (t) => (typeof t === "string" ? t : String(t));

  function baseOptions(priceFormatter, timeFormatter) {
    return {
      autoSize: true,
      layout: { background: { color: "#ffffff" }, textColor: "#333", fontSize: 12 },
      grid: { vertLines: { color: "#f0f0f0" }, horzLines: { color: "#f0f0f0" } },
      crosshair: { mode: LWC.CrosshairMode.Normal },
      rightPriceScale: { borderColor: "#ccc" },
      // Both edges fixed: the first and last points stay at the chart's edges, never a blank band
      // beside them (a chart drawn while narrow, or a range kept from fewer points).
      timeScale: {
        borderColor: "#ccc",
        timeVisible: !daily,
        secondsVisible: !daily,
        tickMarkFormatter: tick,
        fixLeftEdge: true,
        fixRightEdge: true,
      },
      localization: { priceFormatter: priceFormatter, timeFormatter: timeFormatter || timeText },
      handleScroll: true,
      handleScale: true,
    };
  }

  // A legend in the chart's corner: the values under the crosshair (the last ones otherwise).
  function legend(el, chart, rows) {
    let box = el.querySelector(".legend");
    if (!box) {
      box = document.createElement("div");
      box.className = "legend";
      el.appendChild(box);
    }
    const show = (param) => {
      const parts = [];
      let when = null;
      for (const r of rows) {
        const d = param && param.seriesData ? param.seriesData.get(r.series) : null;
        const v = d || r.last;
        if (!v || (v.value === undefined && v.close === undefined)) continue;
        if (param && param.time !== undefined) when = timeText(param.time);
        parts.push('<span style="color:' + r.colour + '">' + r.name + " " + r.text(v) + "</span>");
      }
      const here = param && param.time !== undefined ? rows.flatMap((r) => (r.fills && r.fills.get(key(param.time))) || []) : [];
      const said = here.length ? '<br><span class="fills">' + here.join("; ") + "</span>" : "";
      box.innerHTML = (when ? "<b>" + when + "</b> " : "") + parts.join(" · ") + said;
    };
    chart.subscribeCrosshairMove(show);
    show(null);
  }

  // A chart's container, emptied for a new drawing; the range the person zoomed or panned to (a wheel, a
  // drag or a touch on the chart) is kept in `ranges` and put back by `showRange`; a chart nobody touched
  // shows all its points again.
  const ranges = {};
  const touched = {};
  function chartIn(id, parent, cls) {
    let el = document.getElementById(id);
    if (!el) {
      el = document.createElement("div");
      el.id = id;
      el.className = cls;
      parent.appendChild(el);
      for (const ev of ["wheel", "mousedown", "touchstart"]) el.addEventListener(ev, () => (touched[id] = true), { passive: true });
    }
    const old = state.charts[id];
    if (old && touched[id] && el.contains(old.chart.chartElement())) ranges[id] = old.chart.timeScale().getVisibleLogicalRange();
    else delete ranges[id];
    if (old) old.chart.remove();
    el.querySelectorAll(".legend").forEach((n) => n.remove());
    return el;
  }
  function showRange(id, chart) {
    if (ranges[id]) chart.timeScale().setVisibleLogicalRange(ranges[id]);
    else chart.timeScale().fitContent();
  }

  // Whether `data` differs from what chart `id` last drew (an update with the same data redraws nothing,
  // so a zoom stays as it is).
  const drawn = {};
  function changed(id, data) {
    const s = JSON.stringify(data);
    if (drawn[id] === s && state.charts[id] && document.getElementById(id)) return false;
    drawn[id] = s;
    return true;
  }

  // One point per time (the last wins), in time order.
  function series(times, values) {
    const m = new Map();
    times.forEach((t, i) => {
      if (Number.isFinite(values[i])) m.set(key(chartTime(t)), { time: chartTime(t), value: values[i] });
    });
    return Array.from(m.values());
  }

  function drawEquity(pts) {
    if (!changed("equity-chart", pts)) return;
    const el = chartIn("equity-chart", document.getElementById("equity-section"), "chart");
    const chart = LWC.createChart(el, baseOptions(money));
    const t = pts.map((p) => p.t);
    const eq = pts.map((p) => p.equity);
    const lines = [
      { name: "tradebot", colour: "#0a66c2", values: eq },
      { name: "buy & hold", colour: "#888888", values: pts.map((p) => p.buy_hold) },
      { name: "cash", colour: "#b0b0b0", values: eq.map(() => (eq.length ? eq[0] : 0)) },
    ];
    const rows = lines.map((l) => {
      const s = chart.addLineSeries({ color: l.colour, lineWidth: 2, title: l.name, priceLineVisible: false });
      const data = series(t, l.values);
      s.setData(data);
      return { series: s, name: l.name, colour: l.colour, last: data[data.length - 1], text: (v) => money(v.value) };
    });
    legend(el, chart, rows);
    showRange("equity-chart", chart);
    state.charts["equity-chart"] = { chart: chart, points: pts.length };
    // Drawdown from the running peak, of the strategy and of buy-and-hold.
    const dd = (vals) => {
      let peak = -Infinity;
      return vals.map((v) => {
        peak = Math.max(peak, v);
        return peak > 0 ? v / peak - 1 : 0;
      });
    };
    const del = chartIn("drawdown-chart", document.getElementById("equity-section"), "chart small");
    const dchart = LWC.createChart(del, baseOptions(pct));
    const a = dchart.addAreaSeries({ lineColor: "#c0392b", topColor: "rgba(192,57,43,0.05)", bottomColor: "rgba(192,57,43,0.35)", title: "tradebot", priceLineVisible: false });
    const ad = series(t, dd(eq));
    a.setData(ad);
    const b = dchart.addLineSeries({ color: "#888888", lineWidth: 1, title: "buy & hold", priceLineVisible: false });
    const bd = series(t, dd(pts.map((p) => p.buy_hold)));
    b.setData(bd);
    legend(del, dchart, [
      { series: a, name: "tradebot", colour: "#c0392b", last: ad[ad.length - 1], text: (v) => pct(v.value) },
      { series: b, name: "buy & hold", colour: "#888", last: bd[bd.length - 1], text: (v) => pct(v.value) },
    ]);
    showRange("drawdown-chart", dchart);
    state.charts["drawdown-chart"] = { chart: dchart, points: ad.length };
  }

  // The trailing stop's level while a position is held: `stop` below the highest close since the entry.
  function stopLine(p, times, stop) {
    if (!(stop > 0)) return [];
    const fills = p.fills.slice().sort((x, y) => new Date(x.t) - new Date(y.t));
    let held = 0, high = 0, k = 0;
    return times.map((t, i) => {
      const at = new Date(p.t[i]);
      while (k < fills.length && new Date(fills[k].t) <= at) {
        const f = fills[k++];
        if (f.buy) {
          high = held > 0 ? Math.max(high, f.price) : f.price;
          held += f.qty;
        } else held = Math.max(0, held - f.qty);
      }
      if (held <= 1e-12) return { time: t };
      high = Math.max(high, p.close[i]);
      return { time: t, value: high * (1 - stop) };
    });
  }

  function drawPrice(p, stop) {
    if (!changed("price-" + p.symbol, [p, stop])) return;
    const wrap = document.getElementById("price-charts");
    let box = document.getElementById("price-box-" + p.symbol);
    if (!box) {
      box = document.createElement("div");
      box.id = "price-box-" + p.symbol;
      box.innerHTML = "<h3>" + p.symbol + "</h3>";
      wrap.appendChild(box);
    }
    const el = chartIn("price-" + p.symbol, box, "chart price");
    const chart = LWC.createChart(el, baseOptions(money));
    const times = p.t.map(chartTime);
    const ohlc = p.open && p.open.length === p.t.length;
    const bars = [];
    const seen = new Map();
    times.forEach((t, i) => {
      const b = ohlc
        ? { time: t, open: p.open[i], high: p.high[i], low: p.low[i], close: p.close[i] }
        : { time: t, open: p.close[i], high: p.close[i], low: p.close[i], close: p.close[i] };
      if (seen.has(key(t))) bars[seen.get(key(t))] = b;
      else {
        seen.set(key(t), bars.length);
        bars.push(b);
      }
    });
    const candles = chart.addCandlestickSeries({ upColor: "#26a69a", downColor: "#ef5350", borderVisible: false, wickUpColor: "#26a69a", wickDownColor: "#ef5350", title: p.symbol });
    candles.setData(bars);
    const volume = chart.addHistogramSeries({ priceFormat: { type: "volume" }, priceScaleId: "", color: "rgba(10,102,194,0.35)", priceLineVisible: false, lastValueVisible: false });
    volume.priceScale().applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
    const vols = ohlc ? bars.map((b) => ({ time: b.time, value: p.volume[times.findIndex((t) => key(t) === key(b.time))] || 0 })) : [];
    volume.setData(vols);
    candles.priceScale().applyOptions({ scaleMargins: { top: 0.08, bottom: 0.25 } });
    const stopData = stopLine(p, times, stop).filter((x, i, a) => i === a.length - 1 || key(a[i + 1].time) !== key(x.time));
    const trail = chart.addLineSeries({ color: "#e67e22", lineWidth: 1, lineStyle: LWC.LineStyle.Dashed, title: "trailing stop", priceLineVisible: false, lastValueVisible: false });
    trail.setData(stopData);
    // Each fill on the first bar at or after it, with its order's reason.
    const markers = [];
    const fills = new Map();
    for (const f of p.fills) {
      const ft = new Date(f.t);
      let i = p.t.findIndex((t) => new Date(t) >= ft);
      if (i < 0) i = p.t.length - 1;
      if (i < 0) continue;
      const side = f.buy ? "buy" : "sell";
      // On the chart a short label (the reason only when it is not the model's); in full in the legend
      // when the crosshair is on its bar.
      const other = f.reason && f.reason !== "model";
      markers.push({
        time: times[i],
        position: f.buy ? "belowBar" : "aboveBar",
        color: f.buy ? "#1e7e34" : "#c0392b",
        shape: f.buy ? "arrowUp" : "arrowDown",
        text: (f.buy ? "B " : "S ") + f.qty + (other ? " " + f.reason : ""),
      });
      const k = key(times[i]);
      if (!fills.has(k)) fills.set(k, []);
      fills.get(k).push(side + " " + f.qty + " @ " + money(f.price) + (f.reason ? " (" + f.reason + ")" : ""));
    }
    const order = (m) => (typeof m.time === "string" ? m.time : String(m.time).padStart(12, "0"));
    markers.sort((a, b) => (order(a) < order(b) ? -1 : order(a) > order(b) ? 1 : 0));
    candles.setMarkers(markers);
    legend(el, chart, [
      { series: candles, fills: fills, name: "", colour: "#333", last: bars[bars.length - 1], text: (v) => "O " + money(v.open) + " H " + money(v.high) + " L " + money(v.low) + " C " + money(v.close) },
      { series: volume, name: "vol", colour: "#0a66c2", last: vols[vols.length - 1], text: (v) => Math.round(v.value).toLocaleString("en-US") },
      { series: trail, name: "stop", colour: "#e67e22", last: stopData[stopData.length - 1], text: (v) => money(v.value) },
    ]);
    showRange("price-" + p.symbol, chart);
    state.charts["price-" + p.symbol] = {
      chart: chart, points: bars.length, ohlc: ohlc, volume: vols.length,
      markers: markers.length, stop: stopData.filter((x) => x.value !== undefined).length,
      reasons: Array.from(fills.values()).flat().filter((t) => /\(.+\)$/.test(t)).length,
    };
  }

  function drawTraining(runs) {
    document.querySelectorAll(".train-chart").forEach((el) => {
      const run = runs.find((r) => r.id === el.dataset.run);
      const values = run ? run.curves[el.dataset.curve] : null;
      if (!values) return;
      const per = el.dataset.per;
      // A section replaced by an update has new, empty containers: those are drawn again.
      if (!changed(el.id, values) && el.querySelector("canvas")) return;
      const prev = state.charts[el.id];
      if (prev) prev.chart.remove();
      el.querySelectorAll(".legend").forEach((n) => n.remove());
      const fmt = (v) => (Math.abs(v) >= 1000 ? v.toFixed(0) : v.toPrecision(4));
      const opts = baseOptions(fmt, (t) => per + " " + t);
      opts.timeScale = { borderColor: "#ccc", tickMarkFormatter: (t) => String(t) };
      const chart = LWC.createChart(el, opts);
      const s = chart.addLineSeries({ color: "#6a1b9a", lineWidth: 2, title: el.dataset.curve, priceLineVisible: false });
      const data = values.map((v, i) => ({ time: i + 1, value: v })).filter((d) => Number.isFinite(d.value));
      s.setData(data);
      legend(el, chart, [{ series: s, name: el.dataset.curve, colour: "#6a1b9a", last: data[data.length - 1], text: (v) => fmt(v.value) }]);
      chart.timeScale().fitContent();
      state.charts[el.id] = { chart: chart, points: data.length };
    });
  }

  // The Promote form's models, kept in step without touching a choice already made.
  function promoteChoices(models) {
    const sel = document.querySelector("#control-promote select[name=id]");
    if (!sel) return;
    const want = models.filter((m) => m.state !== "champion").slice(0, 20).map((m) => [m.id, m.id + " (" + m.state + ")"]);
    const have = Array.from(sel.options).slice(1).map((o) => [o.value, o.text]);
    if (JSON.stringify(want) === JSON.stringify(have)) return;
    const chosen = sel.value;
    while (sel.options.length > 1) sel.remove(1);
    for (const [id, text] of want) sel.add(new Option(text, id));
    if (want.some(([id]) => id === chosen)) sel.value = chosen;
  }

  function draw(d) {
    daily = !d.timeframe || d.timeframe.endsWith("Day") || d.timeframe.endsWith("Week");
    if (!LWC) return;
    drawEquity(d.equity || []);
    for (const p of d.prices || []) drawPrice(p, d.trailing_stop || 0);
    drawTraining(d.training || []);
  }

  function apply(u) {
    for (const [name, html] of u.sections) {
      if (state.sections[name] === html) continue;
      state.sections[name] = html;
      const el = document.getElementById("sec-" + name);
      if (el) el.innerHTML = html;
    }
    promoteChoices(u.data.models || []);
    draw(u.data);
    state.seq = u.seq;
    state.updates += 1;
    state.data = u.data;
  }

  for (const form of document.querySelectorAll("#controls form")) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const out = form.querySelector(".outcome");
      out.textContent = "…";
      try {
        const r = await fetch(form.action, {
          method: "POST",
          credentials: "same-origin",
          headers: { Accept: "application/json" },
          body: new URLSearchParams(new FormData(form)),
        });
        const a = await r.json();
        out.textContent = a.ok ? a.message : a.error;
        out.className = "outcome " + (a.ok ? "ok" : "bad");
        if (a.ok) form.reset();
      } catch (e) {
        out.textContent = "no answer from the daemon: " + e;
        out.className = "outcome bad";
      }
    });
  }

  const first = document.getElementById("first-data");
  try {
    const d = JSON.parse(first.textContent);
    if (d) {
      state.data = d;
      draw(d);
    }
  } catch (e) {
    console.error("dashboard data", e);
  }
  const live = () => document.getElementById("live");
  const events = new EventSource("/api/v1/events");
  events.addEventListener("update", (ev) => {
    apply(JSON.parse(ev.data));
    const l = live();
    if (l) l.className = "live on";
  });
  events.onerror = () => {
    const l = live();
    if (l) {
      l.className = "live off";
      l.title = "no updates from the daemon: reconnecting";
    }
  };
})();
