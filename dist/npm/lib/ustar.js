// A small reader for the (uncompressed) tar archives of a loopx release:
// enough of ustar, GNU and pax to find one regular file by name. Release
// archives are ustar (scripts/build-release.sh); long-name records are
// understood anyway so a differently built archive is not misread.

const BLOCK = 512;

/**
 * Returns the contents of the first regular file in `tar` whose path, without
 * a leading "./", equals `name`, or null when there is none.
 * Throws when a header is malformed or an entry runs past the end.
 */
export function readTarEntry(tar, name) {
  let offset = 0;
  let longName = null; // from a GNU 'L' record or a pax 'path' for the next entry
  while (offset + BLOCK <= tar.length) {
    const header = tar.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) return null; // end-of-archive marker
    const size = parseSize(header.subarray(124, 136));
    const type = String.fromCharCode(header[156] || 0x30);
    const dataStart = offset + BLOCK;
    const dataEnd = dataStart + size;
    if (dataEnd > tar.length) throw new Error("truncated tar archive");
    const data = tar.subarray(dataStart, dataEnd);
    offset = dataStart + Math.ceil(size / BLOCK) * BLOCK;

    if (type === "L") {
      longName = cString(data);
      continue;
    }
    if (type === "x") {
      longName = paxPath(data) ?? longName;
      continue;
    }
    const path = longName ?? headerPath(header);
    longName = null;
    if ((type === "0" || type === "7") && stripDot(path) === name) return Buffer.from(data);
  }
  return null;
}

function headerPath(header) {
  const name = cString(header.subarray(0, 100));
  // ustar keeps long paths split in a prefix field; GNU headers use those
  // bytes for other things and say so with their "ustar  " magic.
  const magic = header.subarray(257, 263).toString("latin1");
  if (magic === "ustar\0") {
    const prefix = cString(header.subarray(345, 500));
    if (prefix) return `${prefix}/${name}`;
  }
  return name;
}

function stripDot(path) {
  return path.startsWith("./") ? path.slice(2) : path;
}

function cString(bytes) {
  const end = bytes.indexOf(0);
  return bytes.subarray(0, end === -1 ? bytes.length : end).toString("utf8");
}

// Octal, NUL/space terminated; or GNU base-256 when the high bit is set.
function parseSize(field) {
  if (field[0] & 0x80) {
    let size = field[0] & 0x7f;
    for (let i = 1; i < field.length; i++) size = size * 256 + field[i];
    return size;
  }
  const text = field.toString("latin1").replace(/[\0 ]+$/, "").trim();
  if (!/^[0-7]*$/.test(text)) throw new Error("malformed tar header");
  return text === "" ? 0 : parseInt(text, 8);
}

// pax records: "<length> <key>=<value>\n", repeated.
function paxPath(data) {
  let path = null;
  let offset = 0;
  while (offset < data.length) {
    const space = data.indexOf(0x20, offset);
    if (space === -1) break;
    const length = parseInt(data.subarray(offset, space).toString("latin1"), 10);
    if (!(length > 0)) break;
    const record = data.subarray(space + 1, offset + length - 1).toString("utf8");
    const eq = record.indexOf("=");
    if (record.slice(0, eq) === "path") path = record.slice(eq + 1);
    offset += length;
  }
  return path;
}
