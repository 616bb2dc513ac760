// ProxyFleet UI behaviour: the header's cluster selector, confirmations, and the dashboard charts (Chart.js).
"use strict";

document.addEventListener("change", (event) => {
  if (event.target.matches("select[data-autosubmit]")) event.target.form.submit();
});

// The header's Menu button (narrow screens): shows or hides the navigation.
document.addEventListener("click", (event) => {
  const toggle = event.target.closest(".menu-toggle");
  if (!toggle) return;
  const open = toggle.getAttribute("aria-expanded") !== "true";
  toggle.setAttribute("aria-expanded", String(open));
  document.getElementById(toggle.getAttribute("aria-controls")).classList.toggle("open", open);
});

document.addEventListener("submit", (event) => {
  const message = event.target.dataset.confirm;
  if (message && !window.confirm(message)) event.preventDefault();
});

const CHART_REFRESH_MS = 15000;
const DAY_MS = 24 * 3600 * 1000;
const COLOURS = ["#2563eb", "#b42318", "#2a7d4f", "#b7791f", "#7c3aed", "#0e7490"];

function timeLabel(ms, withDate) {
  const at = new Date(ms);
  const time = at.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hourCycle: "h23" });  // 24-hour, as the tables
  return withDate ? `${at.toLocaleDateString([], { month: "short", day: "numeric" })} ${time}` : time;
}

function show(chart, data) {
  const withDate = data.until - data.since > DAY_MS;
  chart.data.datasets = data.series.map((s, i) => ({
    label: s.label ?? s.node,
    data: s.points.map(([x, y]) => ({ x, y })),
    borderColor: COLOURS[i % COLOURS.length],
    backgroundColor: COLOURS[i % COLOURS.length],
    pointRadius: 0,
    borderWidth: 1.5,
  }));
  chart.options.scales.x.min = data.since;
  chart.options.scales.x.max = data.until;
  chart.options.scales.x.ticks.callback = (ms) => timeLabel(ms, withDate);
  chart.options.plugins.tooltip.callbacks.title = (items) => timeLabel(items[0].parsed.x, true);
  chart.update();
}

async function fetchSeries(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

async function startChart(canvas) {
  const url = canvas.dataset.chartUrl;
  const chart = new window.Chart(canvas, {
    type: "line",
    data: { datasets: [] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: false,
      normalized: true,
      scales: { x: { type: "linear", ticks: { maxTicksLimit: 8 } }, y: { beginAtZero: true } },
      plugins: { tooltip: { callbacks: {} } },
    },
  });
  show(chart, await fetchSeries(url));
  setInterval(() => fetchSeries(url).then((data) => show(chart, data)).catch(console.error), CHART_REFRESH_MS);
}

window.addEventListener("load", () => {
  if (!window.Chart) return;
  document.querySelectorAll("canvas[data-chart-url]").forEach((canvas) => {
    startChart(canvas).catch(console.error);
  });
});

// A benchmark run's page: the flash that announced the run ("queued...") goes away once the live status says the
// run finished, so it never contradicts the page.
document.addEventListener("htmx:afterSwap", (event) => {
  const status = document.getElementById("run-status");
  if (status && ["done", "failed", "cancelled"].includes(status.dataset.status)) {
    document.querySelectorAll(".flash").forEach((flash) => flash.remove());
  }
});
