//go:build !linux

package capture

import "fmt"

func afPacketApplies(string) bool { return false }

func openAFPacket(name string, _ LiveOptions) ([]packetReader, error) {
	return nil, fmt.Errorf("interface %s: AF_PACKET capture is Linux only (use the libpcap reader)", name)
}
