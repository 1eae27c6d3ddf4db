// Applies the filter in the address to the menus, rows and sections; keeps the two in step.
(function () {
  var menus = {outcome: document.getElementById('f-outcome'), task: document.getElementById('f-task')};
  function wanted() {
    var out = {outcome: '', task: ''};
    var hash = location.hash.slice(1);
    if (hash.indexOf('=') < 0) return out;
    hash.split('&').forEach(function (part) {
      var kv = part.split('=');
      if (kv[0] in out) out[kv[0]] = decodeURIComponent(kv.slice(1).join('='));
    });
    return out;
  }
  function apply() {
    var w = wanted();
    if (location.hash.indexOf('=') < 0) {
      w.outcome = menus.outcome.value; w.task = menus.task.value;
    } else {
      menus.outcome.value = w.outcome; menus.task.value = w.task;
    }
    var shown = 0;
    document.querySelectorAll('[data-episode]').forEach(function (el) {
      var ok = (!w.outcome || el.dataset.outcome === w.outcome) && (!w.task || el.dataset.task === w.task);
      el.hidden = !ok;
      if (ok && el.tagName === 'TR') shown += 1;
    });
    document.getElementById('shown').textContent = shown;
  }
  function choose() {
    var parts = [];
    if (menus.outcome.value) parts.push('outcome=' + encodeURIComponent(menus.outcome.value));
    if (menus.task.value) parts.push('task=' + encodeURIComponent(menus.task.value));
    history.replaceState(null, '', parts.length ? '#' + parts.join('&') : location.pathname);
    apply();
  }
  menus.outcome.addEventListener('change', choose);
  menus.task.addEventListener('change', choose);
  window.addEventListener('hashchange', apply);
  apply();
})();
