package chcluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clusterXML goes to a node's config.d, which clickhouse-server merges
// into the config chtest writes. Caches are small: four servers share a
// small machine. The interserver host is loopback: replicas fetch parts
// from each other there.
const clusterXML = `<?xml version="1.0"?>
<yandex>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <interserver_http_port>%d</interserver_http_port>
  <remote_servers>
    <%s>
%s    </%s>
  </remote_servers>
  <zookeeper>
    <node><host>127.0.0.1</host><port>%d</port></node>
    <session_timeout_ms>30000</session_timeout_ms>
  </zookeeper>
  <macros>
    <shard>%d</shard>
    <replica>s%dr%d</replica>
  </macros>
  <distributed_ddl>
    <path>/clickhouse/task_queue/ddl</path>
  </distributed_ddl>
</yandex>
`

// usersXML goes to a node's users.d: the store's cluster mode wants reads
// and writes to pick a shard's replicas in the same order (see
// store.checkCluster), and 18.16 takes that from the profile only.
const usersXML = `<?xml version="1.0"?>
<yandex>
  <profiles><default><load_balancing>in_order</load_balancing></default></profiles>
</yandex>
`

// writeNodeConfig writes n's cluster config (rewritten on each start, so
// that it always names the current ports).
func writeNodeConfig(c *Cluster, n *Node) error {
	var shards strings.Builder
	for i := 0; i < len(c.Nodes); {
		shards.WriteString("      <shard><internal_replication>true</internal_replication>\n")
		s := c.Nodes[i].Shard
		for ; i < len(c.Nodes) && c.Nodes[i].Shard == s; i++ {
			fmt.Fprintf(&shards, "        <replica><host>127.0.0.1</host><port>%d</port></replica>\n", c.Nodes[i].TCPPort)
		}
		shards.WriteString("      </shard>\n")
	}
	dir := filepath.Join(n.Dir, "config.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	xml := fmt.Sprintf(clusterXML, n.InterPort, c.Name, shards.String(), c.Name, c.ZKPort, n.Shard, n.Shard, n.Replica)
	if err := os.WriteFile(filepath.Join(dir, "cluster.xml"), []byte(xml), 0o644); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	users := filepath.Join(n.Dir, "users.d")
	if err := os.MkdirAll(users, 0o755); err != nil {
		return fmt.Errorf("node users config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(users, "cluster.xml"), []byte(usersXML), 0o644); err != nil {
		return fmt.Errorf("node users config: %w", err)
	}
	return nil
}

// Query runs sql on node i over HTTP and returns its TabSeparated answer
// (for tests and probes; the store itself speaks the native protocol).
// The text is the harness's own, never captured data.
func (c *Cluster) Query(ctx context.Context, i int, sql string) (string, error) {
	n := c.Nodes[i]
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/", n.HTTPPort), strings.NewReader(sql))
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("s%dr%d: %w", n.Shard, n.Replica, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("s%dr%d: %w", n.Shard, n.Replica, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("s%dr%d: %s: %s", n.Shard, n.Replica, resp.Status, strings.TrimSpace(tailText(b)))
	}
	return string(b), nil
}
