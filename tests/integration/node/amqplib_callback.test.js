// amqplib's callback API against the broker at ROOST_AMQP_URL, the cases of amqplib's own
// test suite around "send to and get from queue" (its sending-messages and ConfirmChannel
// groups): the publishes that fill the client's write buffer on an exclusive queue, then
// connection.close, used to end in a reset (EPIPE in the client) and a hung suite.
// Run with `node --test`; NODE_PATH points at the amqplib that scripts/test fetched.
'use strict';
const { describe, it, afterEach } = require('node:test');
const assert = require('node:assert');
const { connect } = require('amqplib/callback_api');

const URL = process.env.ROOST_AMQP_URL;
const body = () => Buffer.from(`m-${Math.random().toString(36).slice(2)}`);

// one connection and channel per case, closed (and the close awaited) after it
function withChannel(confirm, run) {
  return (_t, done) => {
    connect(URL, (err, conn) => {
      if (err) return done(err);
      conn.on('error', done);
      const open = confirm ? conn.createConfirmChannel.bind(conn) : conn.createChannel.bind(conn);
      open({}, (err, ch) => {
        if (err) return done(err);
        run(ch, (err) => (err ? done(err) : conn.close(done)));
      });
    });
  };
}

// the client's buffer fills after n publishes: the later cases send twice as many
const fill = { plain: 0, confirm: 0 };

for (const confirm of [false, true]) {
  const kind = confirm ? 'confirm' : 'plain';
  describe(`${kind} channel`, () => {
    it('sends to and gets from an exclusive queue', withChannel(confirm, (ch, done) => {
      ch.assertQueue('', { exclusive: true }, (err, ok) => {
        if (err) return done(err);
        const sent = body();
        ch.sendToQueue(ok.queue, sent);
        const poll = () => ch.checkQueue(ok.queue, (err, state) => {
          if (err) return done(err);
          if (state.messageCount === 0) return setImmediate(poll);
          ch.get(ok.queue, { noAck: true }, (err, msg) => {
            if (err) return done(err);
            assert.ok(msg, 'basic.get found the queue empty');
            assert.deepStrictEqual(msg.content, sent);
            done();
          });
        });
        poll();
      });
    }));

    it('publishes synchronously until the write buffer is full, then closes', withChannel(confirm, (ch, done) => {
      ch.assertQueue('', { exclusive: true }, (err, ok) => {
        if (err) return done(err);
        const payload = body();
        let n = 0;
        while (ch.sendToQueue(ok.queue, payload)) n++;
        assert.ok(n > 0);
        fill[kind] = n;
        done();
      });
    }));

    it('publishes twice that without a full buffer, then closes', withChannel(confirm, (ch, done) => {
      ch.assertQueue('', { exclusive: true }, (err, ok) => {
        if (err) return done(err);
        const payload = body();
        for (let i = 0; i < fill[kind] * 2; i++) ch.sendToQueue(ok.queue, payload);
        done();
      });
    }));
  });
}

describe('confirms', () => {
  it('confirms an unroutable publish', withChannel(true, (ch, done) => {
    ch.publish('', '', Buffer.from('nowhere'), {}, done);
  }));

  it('waits for a thousand confirms', withChannel(true, (ch, done) => {
    for (let i = 0; i < 1000; i++) ch.publish('', '', Buffer.from('nowhere'), {});
    ch.waitForConfirms(done);
  }));
});

describe('errors', () => {
  it('basic.get from a missing queue closes the channel with 404', (_t, done) => {
    connect(URL, (err, conn) => {
      if (err) return done(err);
      conn.createChannel((err, ch) => {
        if (err) return done(err);
        ch.on('error', (e) => {
          assert.strictEqual(e.code, 404);
          conn.close(done);
        });
        ch.get(`missing-${Math.random()}`, {}, () => {});
      });
    });
  });
});
