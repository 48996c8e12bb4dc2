// Tables as cards on a phone: each cell carries its column's name (the stylesheet shows it
// beside the value under 40em), read from the table's head, spans counted.
document.querySelectorAll('table').forEach(function (table) {
  var head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
  if (!head || table.classList.contains('keep')) return;
  var names = [];
  Array.prototype.forEach.call(head.cells, function (cell) {
    for (var i = 0; i < cell.colSpan; i++) names.push(cell.textContent.trim());
  });
  Array.prototype.forEach.call(table.tBodies, function (body) {
    Array.prototype.forEach.call(body.rows, function (row) {
      var column = 0;
      Array.prototype.forEach.call(row.cells, function (cell) {
        if (cell.colSpan === 1 && names[column]) cell.dataset.label = names[column];
        column += cell.colSpan;
      });
    });
  });
  table.classList.add('labelled');
});
document.querySelectorAll('button[data-copy]').forEach(function (button) {
  button.hidden = false;
  button.addEventListener('click', function () {
    var text = document.getElementById(button.dataset.copy).textContent.trim();
    navigator.clipboard.writeText(text).then(function () {
      button.textContent = 'Copied';
    }, function () {
      button.textContent = 'Copy failed: select the text';
    });
  });
});
document.querySelectorAll('[data-card-field]').forEach(function (field) {
  var shown = document.getElementById('card-' + field.name);
  if (!shown) return;
  field.addEventListener('input', function () {
    var value = field.value.trim();
    if (field.name === 'image') {
      shown.hidden = value.indexOf('https://') !== 0;
      if (!shown.hidden) shown.src = value;
    } else {
      shown.textContent = value;
    }
  });
});
var composer = document.getElementById('composer');
if (composer) {
  var counter = document.getElementById('compose-counter');
  var pending = null;
  var asked = 0;
  var count = function () {
    var ask = ++asked;
    fetch('/console/compose/count', {
      method: 'POST',
      credentials: 'same-origin',
      body: new URLSearchParams(new FormData(composer))
    }).then(function (answer) { return answer.json(); }).then(function (answer) {
      // Only the latest question's answer is shown.
      if (ask === asked) counter.textContent = answer.text;
    });
  };
  composer.addEventListener('input', function () {
    clearTimeout(pending);
    pending = setTimeout(count, 120);
  });
}
