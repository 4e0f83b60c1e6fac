// Preload (`node --require ./interop/loopback_only.cjs ...`) that pins every TCP listener
// of the process to 127.0.0.1.
//
// supergateway calls `app.listen(port)`, which binds all interfaces and has no flag to
// choose an address. The interop scripts must expose servers on loopback only, so this
// rewrites a listen() that names no host (a bare port, or an options object without `host`)
// to bind 127.0.0.1, and refuses one that names a non-loopback host.
'use strict';

const net = require('node:net');

const LOOPBACK = '127.0.0.1';
const isLoopback = (host) =>
  host === 'localhost' || host === '::1' || /^127\.\d+\.\d+\.\d+$/.test(String(host));

const originalListen = net.Server.prototype.listen;

net.Server.prototype.listen = function listen(...args) {
  const first = args[0];
  if (typeof first === 'number' || (typeof first === 'string' && /^\d+$/.test(first))) {
    // listen(port[, host][, backlog][, callback])
    const second = args[1];
    if (typeof second === 'string') {
      if (!isLoopback(second)) throw new Error(`loopback_only: refusing to listen on ${second}`);
    } else {
      args.splice(1, 0, LOOPBACK);
    }
  } else if (first && typeof first === 'object' && !Array.isArray(first) && first.path === undefined &&
             first.fd === undefined && first._handle === undefined && first.handle === undefined) {
    // listen(options[, callback])
    if (first.host === undefined) {
      args[0] = { ...first, host: LOOPBACK };
    } else if (!isLoopback(first.host)) {
      throw new Error(`loopback_only: refusing to listen on ${first.host}`);
    }
  } else if (first === undefined || typeof first === 'function') {
    // listen([callback]): a random port on every interface; make it loopback.
    args.unshift(0, LOOPBACK);
  }
  return originalListen.apply(this, args);
};
