// The model browser's sketch pad (nbinfer/notebook/sketch.py): an anywidget ESM module.
// Draw with the mouse, a pen or a finger; each finished stroke sends the drawing to the kernel
// as a PNG data URL (`png`); Clear (or the kernel setting `png` to "") wipes it.
// White ink on black, as the digits training data; the canvas keeps these colours in every theme.

function render({ model, el }) {
  const size = model.get("size");
  const canvas = document.createElement("canvas");
  canvas.width = size;
  canvas.height = size;
  canvas.className = "nbs-canvas";
  canvas.style.width = `${size}px`;
  canvas.style.height = `${size}px`;
  canvas.setAttribute("aria-label", "sketch pad: draw with the mouse");
  const ctx = canvas.getContext("2d");

  const wipe = () => {
    ctx.fillStyle = "#000";
    ctx.fillRect(0, 0, size, size);
  };
  wipe();

  let drawing = false;
  let last = null;
  const at = (event) => {
    const box = canvas.getBoundingClientRect();
    return [
      ((event.clientX - box.left) * size) / box.width,
      ((event.clientY - box.top) * size) / box.height,
    ];
  };
  const dot = ([x, y]) => {
    ctx.fillStyle = "#fff";
    ctx.beginPath();
    ctx.arc(x, y, model.get("pen") / 2, 0, 2 * Math.PI);
    ctx.fill();
  };
  const line = (from, to) => {
    ctx.strokeStyle = "#fff";
    ctx.lineWidth = model.get("pen");
    ctx.lineCap = "round";
    ctx.lineJoin = "round";
    ctx.beginPath();
    ctx.moveTo(from[0], from[1]);
    ctx.lineTo(to[0], to[1]);
    ctx.stroke();
  };
  const send = () => {
    model.set("png", canvas.toDataURL("image/png"));
    model.save_changes();
  };

  canvas.addEventListener("pointerdown", (event) => {
    event.preventDefault();
    canvas.setPointerCapture(event.pointerId);
    drawing = true;
    last = at(event);
    dot(last);
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!drawing) return;
    const point = at(event);
    line(last, point);
    last = point;
  });
  const finish = () => {
    if (!drawing) return;
    drawing = false;
    send();
  };
  canvas.addEventListener("pointerup", finish);
  canvas.addEventListener("pointercancel", finish);

  const clear = document.createElement("button");
  clear.className = "nbs-clear jupyter-button";
  clear.textContent = "Clear";
  clear.title = "Wipe the sketch pad";
  clear.addEventListener("click", () => {
    wipe();
    model.set("png", "");
    model.save_changes();
  });
  model.on("change:png", () => {
    if (model.get("png") === "") wipe();
  });

  const box = document.createElement("div");
  box.className = "nbs-pad";
  box.append(canvas, clear);
  el.append(box);
}

export default { render };
