// Entities through @azure/data-tables: create / get / upsert / update /
// delete with ETags, every EDM type as the JS SDK maps it (Int64 <->
// bigint, DateTime <-> Date, Binary <-> Uint8Array, Guid {value,type}),
// listEntities with odata`` filters, select and byPage continuation.
import assert from "node:assert/strict";
import { before, describe, it } from "node:test";

import { odata } from "@azure/data-tables";

import { all, expectError, keysOf, newTable, userProps } from "./common.mjs";

describe("entity CRUD", () => {
  let t;
  before(async () => {
    t = await newTable("crud");
  });

  it("createEntity then getEntity returns the properties, etag and timestamp", async () => {
    const res = await t.createEntity({ partitionKey: "p", rowKey: "c1", name: "Ann", age: 23 });
    assert.match(res.etag, /^W\/"datetime'.+'"$/);
    const e = await t.getEntity("p", "c1");
    assert.deepEqual(userProps(e), { name: "Ann", age: 23 });
    assert.equal(e.etag, res.etag);
    assert.ok(e.timestamp, "timestamp");
  });

  it("createEntity on an existing key: 409 EntityAlreadyExists", async () => {
    await t.createEntity({ partitionKey: "p", rowKey: "c2" });
    await expectError(t.createEntity({ partitionKey: "p", rowKey: "c2" }), 409, "EntityAlreadyExists");
  });

  it("getEntity of a missing key: 404 ResourceNotFound", async () => {
    await expectError(t.getEntity("p", "missing"), 404, ["ResourceNotFound", "EntityNotFound"]);
  });

  it("getEntity with select returns only the selected properties", async () => {
    await t.createEntity({ partitionKey: "p", rowKey: "c3", a: 1, b: "x", c: true });
    const e = await t.getEntity("p", "c3", { queryOptions: { select: ["a", "c"] } });
    assert.deepEqual(userProps(e), { a: 1, c: true });
  });

  it("upsertEntity Merge inserts, then keeps other properties", async () => {
    await t.upsertEntity({ partitionKey: "p", rowKey: "c4", a: 1, b: 2 }, "Merge");
    await t.upsertEntity({ partitionKey: "p", rowKey: "c4", b: 3, c: 4 }, "Merge");
    assert.deepEqual(userProps(await t.getEntity("p", "c4")), { a: 1, b: 3, c: 4 });
  });

  it("upsertEntity Replace drops other properties", async () => {
    await t.upsertEntity({ partitionKey: "p", rowKey: "c5", a: 1, b: 2 }, "Replace");
    await t.upsertEntity({ partitionKey: "p", rowKey: "c5", c: 3 }, "Replace");
    assert.deepEqual(userProps(await t.getEntity("p", "c5")), { c: 3 });
  });

  it("updateEntity Merge with the current etag succeeds and changes the etag", async () => {
    const r1 = await t.createEntity({ partitionKey: "p", rowKey: "c6", a: 1 });
    const r2 = await t.updateEntity({ partitionKey: "p", rowKey: "c6", b: 2 }, "Merge", {
      etag: r1.etag,
    });
    assert.notEqual(r2.etag, r1.etag);
    const e = await t.getEntity("p", "c6");
    assert.deepEqual(userProps(e), { a: 1, b: 2 });
    assert.equal(e.etag, r2.etag);
  });

  it("updateEntity Replace with a stale etag: 412 UpdateConditionNotSatisfied", async () => {
    const r1 = await t.createEntity({ partitionKey: "p", rowKey: "c7", a: 1 });
    await t.updateEntity({ partitionKey: "p", rowKey: "c7", a: 2 }, "Replace");
    await expectError(
      t.updateEntity({ partitionKey: "p", rowKey: "c7", a: 3 }, "Replace", { etag: r1.etag }),
      412,
      "UpdateConditionNotSatisfied",
    );
    assert.equal((await t.getEntity("p", "c7")).a, 2);
  });

  it("updateEntity of a missing entity: 404", async () => {
    await expectError(
      t.updateEntity({ partitionKey: "p", rowKey: "nope", a: 1 }, "Merge"),
      404,
      ["ResourceNotFound", "EntityNotFound"],
    );
  });

  it("deleteEntity with the current etag, then the entity is gone", async () => {
    const r = await t.createEntity({ partitionKey: "p", rowKey: "c8" });
    await t.deleteEntity("p", "c8", { etag: r.etag });
    await expectError(t.getEntity("p", "c8"), 404);
  });

  it("deleteEntity with a stale etag: 412, entity kept", async () => {
    const r = await t.createEntity({ partitionKey: "p", rowKey: "c9", a: 1 });
    await t.upsertEntity({ partitionKey: "p", rowKey: "c9", a: 2 });
    await expectError(t.deleteEntity("p", "c9", { etag: r.etag }), 412, "UpdateConditionNotSatisfied");
    assert.equal((await t.getEntity("p", "c9")).a, 2);
  });

  it("deleteEntity of a missing entity: 404 ResourceNotFound", async () => {
    await expectError(t.deleteEntity("p", "never"), 404, ["ResourceNotFound", "EntityNotFound"]);
  });

  it("keys with quotes, parens, spaces and non-ASCII survive JS URL escaping", async () => {
    // encodeURIComponent leaves ' ( ) literal: the signature must be over
    // the raw path (spec §1.3, §7.1).
    for (const key of ["o'brien", "(a),b", "a b", "Zürich ☃", "emoji 😀", "100%", "x''y", "a+b&c=d"]) {
      await t.createEntity({ partitionKey: key, rowKey: key, v: 1 });
      await t.updateEntity({ partitionKey: key, rowKey: key, v: 2 }, "Merge");
      const e = await t.getEntity(key, key);
      assert.equal(e.partitionKey, key);
      assert.equal(e.rowKey, key);
      assert.equal(e.v, 2);
      await t.deleteEntity(key, key);
    }
  });

  it("etag changes on every write kind", async () => {
    const pk = "p";
    const rk = "etags";
    const tags = [];
    tags.push((await t.createEntity({ partitionKey: pk, rowKey: rk, n: 0 })).etag);
    tags.push((await t.updateEntity({ partitionKey: pk, rowKey: rk, n: 1 }, "Replace")).etag);
    tags.push((await t.updateEntity({ partitionKey: pk, rowKey: rk, n: 2 }, "Merge")).etag);
    tags.push((await t.upsertEntity({ partitionKey: pk, rowKey: rk, n: 3 }, "Merge")).etag);
    tags.push((await t.upsertEntity({ partitionKey: pk, rowKey: rk, n: 3 }, "Replace")).etag);
    assert.equal(new Set(tags).size, tags.length, tags.join(" "));
    assert.equal((await t.getEntity(pk, rk)).etag, tags[tags.length - 1]);
  });

  it("a 32,768-character string: 400 PropertyValueTooLarge; 32,000 fits", async () => {
    await t.createEntity({ partitionKey: "p", rowKey: "s1", s: "x".repeat(32000) });
    assert.equal((await t.getEntity("p", "s1")).s.length, 32000);
    await expectError(
      t.createEntity({ partitionKey: "p", rowKey: "s2", s: "x".repeat(32768) }),
      400,
      "PropertyValueTooLarge",
    );
  });

  it("an invalid property name: 400 PropertyNameInvalid", async () => {
    await expectError(
      t.createEntity({ partitionKey: "p", rowKey: "n1", "bad-name": 1 }),
      400,
      "PropertyNameInvalid",
    );
  });
});

describe("EDM types", () => {
  let t;
  before(async () => {
    t = await newTable("types");
  });

  async function roundtrip(rk, value, options) {
    await t.createEntity({ partitionKey: "t", rowKey: rk, v: value });
    return (await t.getEntity("t", rk, options)).v;
  }

  it("String, including empty, unicode and emoji", async () => {
    for (const [i, s] of ["", "plain", "Ünïcødé ☃ 日本", "😀🎉", "quote ' \" \\"].entries()) {
      assert.equal(await roundtrip(`s${i}`, s), s);
    }
  });

  it("Int32 bounds come back as numbers", async () => {
    assert.equal(await roundtrip("i1", 2147483647), 2147483647);
    assert.equal(await roundtrip("i2", -2147483648), -2147483648);
  });

  it("Int64 as bigint, bounds included", async () => {
    assert.equal(await roundtrip("l1", 9223372036854775807n), 9223372036854775807n);
    assert.equal(await roundtrip("l2", -9223372036854775808n), -9223372036854775808n);
    assert.equal(await roundtrip("l3", { value: "9007199254740993", type: "Int64" }), 9007199254740993n);
  });

  it("Double: fractional and annotated integral values", async () => {
    assert.equal(await roundtrip("d1", 1.5), 1.5);
    assert.equal(await roundtrip("d2", 0.1), 0.1);
    assert.equal(await roundtrip("d3", { value: 2, type: "Double" }), 2);
    assert.equal(await roundtrip("d4", 1e308), 1e308);
    assert.equal(await roundtrip("d5", 1 / 3), 1 / 3);
  });

  it("Double NaN / Infinity / -Infinity as annotated strings", async () => {
    for (const [i, s] of ["NaN", "Infinity", "-Infinity"].entries()) {
      const got = await roundtrip(`n${i}`, { value: s, type: "Double" });
      assert.ok(got === s || Object.is(Number(got), Number(s)), `${s} -> ${got}`);
    }
  });

  it("Boolean", async () => {
    assert.equal(await roundtrip("b1", true), true);
    assert.equal(await roundtrip("b2", false), false);
  });

  it("DateTime <-> Date (milliseconds)", async () => {
    const d = new Date("2024-05-01T10:11:12.345Z");
    const got = await roundtrip("t1", d);
    assert.ok(got instanceof Date);
    assert.equal(got.toISOString(), d.toISOString());
  });

  it("DateTime keeps 7 fraction digits (disableTypeConversion shows the text)", async () => {
    const text = "2021-04-07T23:56:22.6754067Z";
    const got = await roundtrip("t2", { value: text, type: "DateTime" }, { disableTypeConversion: true });
    assert.deepEqual(got, { value: text, type: "DateTime" });
  });

  it("Binary <-> Uint8Array", async () => {
    const bytes = new Uint8Array([0, 1, 2, 253, 254, 255]);
    const got = await roundtrip("x1", bytes);
    assert.ok(got instanceof Uint8Array);
    assert.deepEqual(Array.from(got), Array.from(bytes));
  });

  it("Guid as {value, type}", async () => {
    const g = "c9da6455-213d-42c9-9a79-3e9149a57833";
    const got = await roundtrip("g1", { value: g, type: "Guid" });
    assert.equal(got.type, "Guid");
    assert.equal(got.value.toLowerCase(), g);
  });

  it("every type in one entity, read back through listEntities", async () => {
    const want = {
      partitionKey: "all",
      rowKey: "one",
      s: "str",
      i: 42,
      l: 1099511627776n,
      d: 3.5,
      b: true,
      t: new Date("2020-01-02T03:04:05.006Z"),
      g: { value: "00000000-0000-0000-0000-000000000063", type: "Guid" },
      x: new Uint8Array([1, 2]),
    };
    await t.createEntity(want);
    const e = (await all(t.listEntities())).find((x) => x.partitionKey === "all");
    assert.ok(e, "entity listed");
    assert.equal(e.s, "str");
    assert.equal(e.i, 42);
    assert.equal(e.l, 1099511627776n);
    assert.equal(e.d, 3.5);
    assert.equal(e.b, true);
    assert.equal(e.t.toISOString(), want.t.toISOString());
    assert.equal(e.g.value, want.g.value);
    assert.deepEqual(Array.from(e.x), [1, 2]);
  });
});

describe("queries", () => {
  let t;
  const N = 60;
  const pk = (i) => `pk${String(i % 6).padStart(2, "0")}`;
  const rk = (i) => `rk${String(i).padStart(3, "0")}`;
  const allKeys = (pred = () => true) =>
    Array.from({ length: N }, (_, i) => i)
      .filter(pred)
      .map((i) => [pk(i), rk(i)])
      .sort((a, b) => (a[0] + "\u0000" + a[1] < b[0] + "\u0000" + b[1] ? -1 : 1));

  before(async () => {
    t = await newTable("query");
    for (let i = 0; i < N; i++) {
      await t.createEntity({
        partitionKey: pk(i),
        rowKey: rk(i),
        n: i,
        big: BigInt(i) + 10000000000n,
        even: i % 2 === 0,
        when: new Date(Date.UTC(2020, 0, 1 + i)),
        name: `name'${i}`,
      });
    }
  });

  it("listEntities returns every entity in (PartitionKey, RowKey) order", async () => {
    assert.deepEqual(keysOf(await all(t.listEntities())), allKeys());
  });

  it("odata`` filter on an Int32 property", async () => {
    const got = await all(t.listEntities({ queryOptions: { filter: odata`n lt ${10}` } }));
    assert.deepEqual(keysOf(got), allKeys((i) => i < 10));
  });

  it("odata`` filter on a string with a quote (escaped by the helper)", async () => {
    const got = await all(t.listEntities({ queryOptions: { filter: odata`name eq ${"name'7"}` } }));
    assert.deepEqual(keysOf(got), allKeys((i) => i === 7));
  });

  it("odata`` filter on a DateTime (Date parameter)", async () => {
    const cut = new Date(Date.UTC(2020, 0, 1 + 50));
    const got = await all(t.listEntities({ queryOptions: { filter: odata`when ge ${cut}` } }));
    assert.deepEqual(keysOf(got), allKeys((i) => i >= 50));
  });

  it("filter on Int64 and Boolean with and/or", async () => {
    const filter = "(big ge 10000000050L and even eq true) or PartitionKey eq 'pk00'";
    const got = await all(t.listEntities({ queryOptions: { filter } }));
    assert.deepEqual(keysOf(got), allKeys((i) => (i >= 50 && i % 2 === 0) || i % 6 === 0));
  });

  it("filter with a PartitionKey range and select", async () => {
    const got = await all(
      t.listEntities({
        queryOptions: {
          filter: odata`PartitionKey ge ${"pk02"} and PartitionKey lt ${"pk04"}`,
          select: ["n"],
        },
      }),
    );
    assert.deepEqual(
      got.map((e) => e.n).sort((a, b) => a - b),
      Array.from({ length: N }, (_, i) => i).filter((i) => i % 6 === 2 || i % 6 === 3),
    );
    assert.ok(got.every((e) => Object.keys(userProps(e)).join() === "n"));
  });

  it("byPage with maxPageSize continues across PartitionKeys", async () => {
    const pages = [];
    for await (const page of t.listEntities().byPage({ maxPageSize: 7 })) {
      assert.ok(page.length <= 7, `page of ${page.length}`);
      pages.push(keysOf(page));
    }
    assert.ok(pages.length >= Math.ceil(N / 7));
    assert.deepEqual(pages.flat(), allKeys());
  });

  it("byPage resumes from a continuationToken", async () => {
    const it1 = t.listEntities().byPage({ maxPageSize: 10 });
    const first = (await it1.next()).value;
    const token = first.continuationToken;
    assert.ok(token, "continuation token");
    const it2 = t.listEntities().byPage({ maxPageSize: 10, continuationToken: token });
    const second = (await it2.next()).value;
    assert.deepEqual([...keysOf(first), ...keysOf(second)], allKeys().slice(0, 20));
  });

  it("a malformed filter: 400 InvalidInput", async () => {
    await expectError(all(t.listEntities({ queryOptions: { filter: "n eq" } })), 400, "InvalidInput");
  });

  it("a query on a missing table: 404 TableNotFound", async () => {
    const { tableClient, tableName } = await import("./common.mjs");
    await expectError(all(tableClient(tableName("gone")).listEntities()), 404, "TableNotFound");
  });
});
