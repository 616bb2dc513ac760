// Benchmark charts (Chart.js): a run's tps and latency over time (live while it runs), tps against connections,
// each target against the first, and a job's throughput across config versions.
"use strict";

const BENCH_COLOURS = ["#2563eb", "#b42318", "#2a7d4f", "#b7791f", "#7c3aed", "#0e7490"];
const BENCH_POLL_MS = 2000;

function benchColour(index) {
  return BENCH_COLOURS[index % BENCH_COLOURS.length];
}

function lineChart(canvas, xTitle, yTitle, xType) {
  return new window.Chart(canvas, {
    type: "line",
    data: { labels: [], datasets: [] },
    options: {
      animation: false,
      maintainAspectRatio: false,
      parsing: xType === "category",
      spanGaps: false,
      scales: {
        x: { type: xType, title: { display: true, text: xTitle } },
        y: { beginAtZero: true, title: { display: true, text: yTitle } },
      },
    },
  });
}

// The run's timeline: every step's points on one axis (steps one after another), a dataset per target.
class Timeline {
  constructor(tpsChart, latencyChart) {
    this.charts = [tpsChart, latencyChart];
    this.offsets = new Map(); // step -> seconds before it
    this.ends = new Map(); // step -> its last t
    this.targets = new Map(); // target -> dataset index
    this.last = 0;
  }

  dataset(target) {
    if (!this.targets.has(target)) {
      const index = this.targets.size;
      this.targets.set(target, index);
      for (const chart of this.charts) {
        chart.data.datasets.push({
          label: target, data: [], borderColor: benchColour(index), backgroundColor: benchColour(index),
          pointRadius: 1.5, borderWidth: 1.5,
        });
      }
    }
    return this.targets.get(target);
  }

  offset(step) {
    if (!this.offsets.has(step)) {
      let before = 0;
      for (const [other, end] of this.ends) if (other < step) before = Math.max(before, this.offsets.get(other) + end);
      this.offsets.set(step, before);
    }
    return this.offsets.get(step);
  }

  add(timeline) {
    for (const series of timeline.series) {
      const index = this.dataset(series.target);
      const offset = this.offset(series.step);
      const [tps, latency] = this.charts.map((chart) => chart.data.datasets[index].data);
      if (tps.length && !this.ends.has(series.step)) {
        tps.push({ x: offset, y: null }); // a gap between one step of a target and its next
        latency.push({ x: offset, y: null });
      }
      for (const [t, value, p95] of series.points) {
        tps.push({ x: offset + t, y: value });
        latency.push({ x: offset + t, y: p95 });
        this.ends.set(series.step, Math.max(this.ends.get(series.step) || 0, t));
      }
    }
    this.last = Math.max(this.last, timeline.last);
    for (const chart of this.charts) chart.update();
  }
}

function showSweep(sweepChart, overheadChart, sweep) {
  const labels = sweep.connections.map(String);
  sweepChart.data.labels = labels;
  sweepChart.data.datasets = sweep.targets.map((t, i) => ({
    label: t.target, data: t.tps, borderColor: benchColour(i), backgroundColor: benchColour(i), pointRadius: 3,
  }));
  sweepChart.update();
  overheadChart.data.labels = labels;
  overheadChart.data.datasets = sweep.targets.slice(1).map((t, i) => ({
    label: `${t.target} / ${sweep.baseline}`, data: t.ratio, backgroundColor: benchColour(i + 1),
  }));
  overheadChart.update();
  overheadChart.canvas.closest("figure").hidden = sweep.targets.length < 2; // one target: nothing to compare
}

async function benchJson(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

async function startRunCharts(container) {
  const canvas = (name) => container.querySelector(`canvas[data-bench-chart="${name}"]`);
  const timeline = new Timeline(
    lineChart(canvas("tps"), "seconds measured", "transactions/s", "linear"),
    lineChart(canvas("latency"), "seconds measured", "p95 latency (ms)", "linear"),
  );
  const sweepChart = lineChart(canvas("sweep"), "connections", "transactions/s", "category");
  const overheadChart = new window.Chart(canvas("overhead"), {
    type: "bar",
    data: { labels: [], datasets: [] },
    options: {
      animation: false, maintainAspectRatio: false,
      scales: { x: { title: { display: true, text: "connections" } }, y: { beginAtZero: true } },
    },
  });
  const url = container.dataset.chartsUrl;
  const poll = async () => {
    const data = await benchJson(`${url}?after=${timeline.last}`);
    timeline.add(data.timeline);
    showSweep(sweepChart, overheadChart, data.sweep);
    container.dataset.status = data.status;
    if (data.status === "queued" || data.status === "running") setTimeout(() => poll().catch(console.error), BENCH_POLL_MS);
  };
  await poll();
}

async function startVersionsChart(canvas) {
  const data = await benchJson(canvas.dataset.historyUrl);
  const chart = lineChart(canvas, "runs (config version)", "mean transactions/s", "category");
  chart.data.labels = data.runs.map((r) => `run ${r.run}${r.version ? ` · v${r.version}` : ""}`);
  chart.data.datasets = data.targets.map((t, i) => ({
    label: t.target, data: t.tps, borderColor: benchColour(i), backgroundColor: benchColour(i), pointRadius: 3,
  }));
  chart.update();
}

window.addEventListener("load", () => {
  if (!window.Chart) return;
  const container = document.querySelector(".bench-charts[data-charts-url]");
  if (container) startRunCharts(container).catch(console.error);
  const versions = document.querySelector("canvas[data-history-url]");
  if (versions) startVersionsChart(versions).catch(console.error);
});
