// Tables through @azure/data-tables: TableServiceClient / TableClient with a
// named-key credential and with a connection string (SharedKeyLite, the
// JS SDK's scheme), create / list (with filters and pages) / delete.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { TableClient, TableServiceClient, odata } from "@azure/data-tables";

import {
  all,
  clientOptions,
  connectionString,
  expectError,
  newTable,
  serviceClient,
  tableClient,
  tableName,
} from "./common.mjs";

describe("tables", () => {
  it("createTable with a named-key credential, listed by listTables", async () => {
    const svc = serviceClient();
    const name = tableName("svc");
    await svc.createTable(name);
    const names = (await all(svc.listTables())).map((t) => t.name);
    assert.ok(names.includes(name), names.join(","));
  });

  it("TableServiceClient.fromConnectionString works", async () => {
    const svc = TableServiceClient.fromConnectionString(connectionString, clientOptions);
    const name = tableName("cs");
    await svc.createTable(name);
    const got = await all(svc.listTables({ queryOptions: { filter: odata`TableName eq ${name}` } }));
    assert.deepEqual(
      got.map((t) => t.name),
      [name],
    );
  });

  it("TableClient.fromConnectionString: create table and entity", async () => {
    const name = tableName("tcs");
    const client = TableClient.fromConnectionString(connectionString, name, clientOptions);
    await client.createTable();
    await client.createEntity({ partitionKey: "p", rowKey: "r", v: 1 });
    const e = await client.getEntity("p", "r");
    assert.equal(e.v, 1);
  });

  it("createTable on an existing table does not throw (409 TableAlreadyExists is handled)", async () => {
    const client = await newTable("dup");
    await client.createTable();
    await serviceClient().createTable(client.tableName);
  });

  it("listTables byPage with maxPageSize follows NextTableName", async () => {
    const svc = serviceClient();
    const prefix = tableName("pg");
    const names = [];
    for (let i = 0; i < 5; i++) {
      names.push(`${prefix}x${i}`);
      await svc.createTable(`${prefix}x${i}`);
    }
    const filter = odata`TableName ge ${prefix} and TableName lt ${prefix + "y"}`;
    const pages = [];
    for await (const page of svc.listTables({ queryOptions: { filter } }).byPage({ maxPageSize: 2 })) {
      pages.push(page.map((t) => t.name));
    }
    assert.ok(pages.length >= 3, JSON.stringify(pages));
    assert.ok(pages.every((p) => p.length <= 2), JSON.stringify(pages));
    assert.deepEqual(pages.flat(), names);
  });

  it("listTables byPage with maxPageSize (no filter) returns every table once", async () => {
    const svc = serviceClient();
    const full = (await all(svc.listTables())).map((t) => t.name);
    const paged = [];
    for await (const page of svc.listTables().byPage({ maxPageSize: 3 })) {
      assert.ok(page.length <= 3);
      paged.push(...page.map((t) => t.name));
    }
    assert.deepEqual(paged, full);
  });

  it("deleteTable removes the table; entity operations then get 404 TableNotFound", async () => {
    const client = await newTable("del");
    await client.createEntity({ partitionKey: "p", rowKey: "r" });
    await serviceClient().deleteTable(client.tableName);
    await expectError(all(client.listEntities()), 404, "TableNotFound");
  });

  it("deleteTable of a missing table does not throw (404 is handled)", async () => {
    await serviceClient().deleteTable(tableName("nosuch"));
    await tableClient(tableName("nosuch")).deleteTable();
  });

  it("createTable with an invalid name: 400 InvalidResourceName / OutOfRangeInput", async () => {
    const svc = serviceClient();
    await expectError(svc.createTable("1abc"), 400, "InvalidResourceName");
    await expectError(svc.createTable("ab"), 400, "OutOfRangeInput");
    await expectError(svc.createTable("a".repeat(64)), 400, "OutOfRangeInput");
  });
});
