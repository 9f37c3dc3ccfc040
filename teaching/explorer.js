// The book's trace explorer: the filters of a run's page (teaching/explorer.py writes this file inline into the page,
// so it works from file://, and the filters' data beside it as JSON, in the element #explore-data).
// Rows get `hidden` when they do not match; the address's #key=value&... sets the first filter and follows a change
// (a link to #outcome=fixed on the same page); a change of a select box writes the address back. When no row is
// left, the page says why (the run has no such filter, no example has the value, or each filter matches alone but
// none together), as text (textContent), never as markup. Without JavaScript every row shows.
(function () {
  var data = JSON.parse(document.getElementById("explore-data").textContent);
  var keys = Object.keys(data), bar = document.getElementById("explore-filters");
  if (bar) bar.hidden = false;
  function own(o, k) { return Object.prototype.hasOwnProperty.call(o, k); }
  function box(k) { return document.getElementById("explore-" + k); }
  function label(v) { return v === "1+" ? "1 or more" : v === "-" ? "(none)" : v.replace(/-/g, " "); }
  function wanted() {
    var f = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var kv = part.split("="), k, v;
      try { k = decodeURIComponent(kv[0]); v = decodeURIComponent(kv[1] || ""); } catch (e) { return; }  // a bad escape
      if (kv.length === 2 && v && own(data, k)) f[k] = v.replace(/ /g, "-");
    });
    return f;
  }
  function fits(row, f, ks) {  // the row matches the filters ks of f
    return ks.every(function (k) {
      var v = row.getAttribute("data-" + k);
      return f[k] === "1+" ? Number(v) >= 1 : v === f[k];
    });
  }
  function alone(rows, f, k) { return rows.filter(function (r) { return fits(r, f, [k]); }).length; }
  function why(rows, f) {
    var active = Object.keys(f), said = [];
    active.forEach(function (k) {
      var m = data[k], v = f[k];
      var what = (k === "outcome" ? "no example is " : "no example has " + m.head + " = ") + label(v) + " in this run";
      if (m.absent) said.push(m.absent);
      else if (!alone(rows, f, k)) said.push(what + (own(m.why, v) ? ": " + m.why[v] : " (it has " + m.has + ")"));
    });
    var each = active.map(function (k) { return data[k].head + " = " + label(f[k]) + ": " + alone(rows, f, k); });
    if (!said.length) said.push("each filter alone matches examples (" + each.join("; ") + "), but no example matches them all");
    var text = said.join("; ");
    return text.charAt(0).toUpperCase() + text.slice(1) + ".";
  }
  function apply(f) {
    keys.forEach(function (k) {
      var b = box(k), v = f[k] || "";
      if (b && !Array.prototype.some.call(b.options, function (o) { return o.value === v; })) {
        var o = document.createElement("option");  // a value no row has
        o.value = v; o.textContent = label(v) + " (0)"; b.appendChild(o);
      }
      if (b) b.value = v;
    });
    document.querySelectorAll("table.explore").forEach(function (table) {
      var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr")), shown = 0, ks = Object.keys(f);
      rows.forEach(function (row) { row.hidden = !fits(row, f, ks); shown += row.hidden ? 0 : 1; });
      var counted = document.getElementById(table.id + "-shown"), said = document.getElementById(table.id + "-why");
      if (counted) counted.textContent = shown + " of " + rows.length + " shown";
      if (!said) return;
      said.textContent = shown || !ks.length ? "" : why(rows, f);
      said.hidden = !said.textContent;
    });
  }
  function changed() {
    var parts = keys.filter(function (k) { return box(k) && box(k).value; }).map(function (k) {
      return encodeURIComponent(k) + "=" + encodeURIComponent(box(k).value); });
    var hash = parts.length ? "#" + parts.join("&") : "";
    try { history.replaceState(null, "", location.pathname + location.search + hash); } catch (e) { location.hash = hash; }
    apply(wanted());
  }
  keys.forEach(function (k) { if (box(k)) box(k).addEventListener("change", changed); });
  window.addEventListener("hashchange", function () { apply(wanted()); });
  apply(wanted());
  document.documentElement.setAttribute("data-ready-ms", Math.round(performance.now()));  // for bench_explorer.py
})();
