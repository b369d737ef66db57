// Command clusterctl starts and stops a local ClickHouse cluster (package
// chcluster: one ZooKeeper, 2 shards x 2 replicas) for trying rtmon's
// cluster mode; make cluster-up and make cluster-down run it.
//
//	clusterctl up   [--dir DIR] [--db DB]   # prints the store URL
//	clusterctl down [--dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/rtmon/rtmon/store/chcluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: clusterctl up|down [--dir DIR] [--db DB]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "/var/tmp/rtmon-cluster", "the cluster's directory (data, logs, ports and PIDs)")
	db := fs.String("db", "rtmon", "database named in the printed store URL")
	fs.Parse(os.Args[2:])
	if err := run(os.Args[1], *dir, *db); err != nil {
		fmt.Fprintln(os.Stderr, "clusterctl:", err)
		os.Exit(1)
	}
}

func run(cmd, dir, db string) error {
	if cmd == "down" {
		if _, _, err := chcluster.Describe(dir); err != nil {
			return fmt.Errorf("no cluster in %s: %w", dir, err)
		}
		if err := chcluster.StopDir(dir); err != nil {
			return err
		}
		fmt.Printf("cluster in %s stopped (data kept; remove the directory to start afresh)\n", dir)
		return nil
	}
	if c, running, err := chcluster.Describe(dir); err == nil && running {
		fmt.Printf("already up: --store '%s'\n", c.URL(0, db))
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := chcluster.Start(ctx, dir, chcluster.Options{})
	if err != nil {
		return err
	}
	fmt.Printf("cluster %s up in %s: ZooKeeper 127.0.0.1:%d\n", c.Name, dir, c.ZKPort)
	for _, n := range c.Nodes {
		fmt.Printf("  shard %d replica %d: native %s, http %d\n", n.Shard, n.Replica, n.Addr(), n.HTTPPort)
	}
	fmt.Printf("--store '%s'\n", c.URL(0, db))
	return nil
}
