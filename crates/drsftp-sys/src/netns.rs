//! Network namespaces: create, enter (setns) and remove them for the WAN lab.
