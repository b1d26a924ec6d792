// Where a node sits in the switch fabric, as Slurm describes it: a topology.conf file
// (`SwitchName=s1 Nodes=tux[0-31]`, `SwitchName=s0 Switches=s[1-4]`) or the
// SLURM_TOPOLOGY_ADDR / SLURM_TOPOLOGY_ADDR_PATTERN pair Slurm puts in every task's
// environment. Either gives a node's address: the switches above it from the top
// down, joined by '.' ("s0.s3": under leaf s3, which is under s0). Nodes whose
// addresses share a prefix share those switches.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace gpurdma::topo {

// Expands a Slurm host list ("tux[0-3,7],login1", "r[1-2]n[01-02]"); false if malformed
// or larger than `limit` names.
bool expand_hostlist(const std::string &text, std::vector<std::string> *names, size_t limit = 1u << 20);

class SwitchTopology {
public:
    // Reads a topology.conf; false with *error naming the line on a malformed one.
    bool read(const std::string &path, std::string *error);
    // The same from text (tests, the fabric model's generated files).
    bool parse(const std::string &text, std::string *error);

    // `host`'s address ("" if no leaf switch lists it). A fully qualified host name also
    // matches its short form, as Slurm's node names usually are.
    std::string address_of(const std::string &host) const;

    // Every node the file lists, in the file's order.
    const std::vector<std::string> &nodes() const { return node_order_; }

private:
    std::map<std::string, std::string> leaf_of_;  // node -> its leaf switch
    std::map<std::string, std::string> parent_of_;  // switch -> the switch that lists it
    std::vector<std::string> node_order_;
};

// The address in Slurm's environment: SLURM_TOPOLOGY_ADDR's switch components, as
// SLURM_TOPOLOGY_ADDR_PATTERN names them ("switch.switch.node"); without a pattern,
// every component but the last (the node). "" when `addr` is empty or has no switch.
std::string address_from_slurm(const std::string &addr, const std::string &pattern);

// Where this node's address came from, and the address.
struct FabricAddress {
    std::string address;  // "" unknown
    std::string source;  // "topology file PATH", "SLURM_TOPOLOGY_ADDR" or ""
    std::string warning;  // a file that could not be read, or that does not list the host
};

// In the order the parameters promise: the file `topology_file` (if not empty), then
// Slurm's environment, else unknown.
FabricAddress find_fabric_address(const std::string &topology_file, const std::string &host);

}  // namespace gpurdma::topo
