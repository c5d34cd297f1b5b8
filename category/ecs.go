package category

// ECS returns the Amazon ECS API throttling table: twenty categories, per
// account and Region, in the order the ECS documentation lists them. Every
// action in a category shares one bucket of Burst tokens refilled at Refill
// per second (shared, the default; WithPerAction gives each its own), so
//
//	set, err := category.New(category.ECS())
//
// throttles like the ECS API. A throttled ECS call fails with
// ThrottlingException, HTTP 400, "Rate exceeded": render a denial with
// errors.Response{Format: errors.AWS}.
//
// Each call returns a new slice the caller may change (to raise a quota, or
// add actions) without affecting other callers. Fargate throttles RunTask
// further (task launch: burst 100, 20 per second); that is a second limit
// stacked on this table, not a category, and is not included.
func ECS() []Category {
	out := make([]Category, len(ecsTable))
	for i, c := range ecsTable {
		c.Actions = append([]string(nil), c.Actions...)
		out[i] = c
	}
	return out
}

var ecsTable = [...]Category{
	{Name: "Cluster modify", Burst: 20, Refill: 1, Actions: []string{"CreateCluster", "DeleteCluster", "PutClusterCapacityProviders", "UpdateCluster", "UpdateClusterSettings"}},
	{Name: "Cluster read", Burst: 50, Refill: 20, Actions: []string{"DescribeClusters", "ListClusters"}},
	{Name: "Task definition modify", Burst: 20, Refill: 1, Actions: []string{"DeregisterTaskDefinition", "RegisterTaskDefinition"}},
	{Name: "Task definition read", Burst: 50, Refill: 20, Actions: []string{"DescribeTaskDefinition", "ListTaskDefinitions", "ListTaskDefinitionFamilies"}},
	{Name: "Task definition deletion", Burst: 5, Refill: 1, Actions: []string{"DeleteTaskDefinitions"}},
	{Name: "Capacity provider modify", Burst: 10, Refill: 1, Actions: []string{"CreateCapacityProvider", "DeleteCapacityProvider", "UpdateCapacityProvider"}},
	{Name: "Capacity provider read", Burst: 50, Refill: 20, Actions: []string{"DescribeCapacityProviders"}},
	{Name: "Tag modify", Burst: 20, Refill: 10, Actions: []string{"TagResource", "UntagResource"}},
	{Name: "Tag read", Burst: 50, Refill: 20, Actions: []string{"ListTagsForResource"}},
	{Name: "Setting modify", Burst: 10, Refill: 1, Actions: []string{"DeleteAccountSetting", "PutAccountSetting", "PutAccountSettingDefault"}},
	{Name: "Setting read", Burst: 50, Refill: 20, Actions: []string{"ListAccountSettings"}},
	{Name: "Cluster resource modify", Burst: 100, Refill: 40, Actions: []string{"DeleteAttributes", "DeregisterContainerInstance", "ExecuteCommand", "PutAttributes", "RunTask", "StartTask", "StopTask", "UpdateContainerAgent", "UpdateContainerInstancesStates"}},
	{Name: "Cluster resource read", Burst: 100, Refill: 20, Actions: []string{"DescribeContainerInstances", "DescribeTasks", "ListAttributes", "ListContainerInstances", "ListTasks"}},
	{Name: "Agent modify", Burst: 200, Refill: 120, Actions: []string{"RegisterContainerInstance", "SubmitAttachmentStateChanges", "SubmitContainerStateChange", "SubmitTaskStateChange"}},
	{Name: "Service modify", Burst: 50, Refill: 5, Actions: []string{"CreateService", "DeleteService", "UpdateService"}},
	{Name: "Service read", Burst: 100, Refill: 20, Actions: []string{"DescribeServices", "ListServices"}},
	{Name: "Service deployment", Burst: 50, Refill: 20, Actions: []string{"DescribeServiceDeployments", "ListServiceDeployments"}},
	{Name: "Service revision", Burst: 50, Refill: 20, Actions: []string{"DescribeServiceRevisions"}},
	{Name: "Task protection", Burst: 200, Refill: 80, Actions: []string{"UpdateTaskProtection", "GetTaskProtection"}},
	{Name: "Cluster service resource read", Burst: 10, Refill: 1, Actions: []string{"ListServicesByNamespace"}},
}
