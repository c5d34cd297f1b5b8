package category

// ECS returns the Amazon ECS API throttling table: twenty categories, per
// account and Region, in the order the ECS documentation lists them. Every
// action in a category shares one bucket of Burst tokens refilled at Refill
// per second (Shared mode, the default), so
//
//	set, err := category.New(category.ECS())
//
// throttles like the ECS API. A throttled ECS call fails with
// ThrottlingException, HTTP 400, "Rate exceeded": render a denial with
// errors.AWS.
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

// ECS category names, as ECS() names them.
const (
	ECSClusterModify              = "Cluster modify"
	ECSClusterRead                = "Cluster read"
	ECSTaskDefinitionModify       = "Task definition modify"
	ECSTaskDefinitionRead         = "Task definition read"
	ECSTaskDefinitionDeletion     = "Task definition deletion"
	ECSCapacityProviderModify     = "Capacity provider modify"
	ECSCapacityProviderRead       = "Capacity provider read"
	ECSTagModify                  = "Tag modify"
	ECSTagRead                    = "Tag read"
	ECSSettingModify              = "Setting modify"
	ECSSettingRead                = "Setting read"
	ECSClusterResourceModify      = "Cluster resource modify"
	ECSClusterResourceRead        = "Cluster resource read"
	ECSAgentModify                = "Agent modify"
	ECSServiceModify              = "Service modify"
	ECSServiceRead                = "Service read"
	ECSServiceDeployment          = "Service deployment"
	ECSServiceRevision            = "Service revision"
	ECSTaskProtection             = "Task protection"
	ECSClusterServiceResourceRead = "Cluster service resource read"
)

var ecsTable = [...]Category{
	{Name: ECSClusterModify, Burst: 20, Refill: 1, Actions: []string{"CreateCluster", "DeleteCluster", "PutClusterCapacityProviders", "UpdateCluster", "UpdateClusterSettings"}},
	{Name: ECSClusterRead, Burst: 50, Refill: 20, Actions: []string{"DescribeClusters", "ListClusters"}},
	{Name: ECSTaskDefinitionModify, Burst: 20, Refill: 1, Actions: []string{"DeregisterTaskDefinition", "RegisterTaskDefinition"}},
	{Name: ECSTaskDefinitionRead, Burst: 50, Refill: 20, Actions: []string{"DescribeTaskDefinition", "ListTaskDefinitions", "ListTaskDefinitionFamilies"}},
	{Name: ECSTaskDefinitionDeletion, Burst: 5, Refill: 1, Actions: []string{"DeleteTaskDefinitions"}},
	{Name: ECSCapacityProviderModify, Burst: 10, Refill: 1, Actions: []string{"CreateCapacityProvider", "DeleteCapacityProvider", "UpdateCapacityProvider"}},
	{Name: ECSCapacityProviderRead, Burst: 50, Refill: 20, Actions: []string{"DescribeCapacityProviders"}},
	{Name: ECSTagModify, Burst: 20, Refill: 10, Actions: []string{"TagResource", "UntagResource"}},
	{Name: ECSTagRead, Burst: 50, Refill: 20, Actions: []string{"ListTagsForResource"}},
	{Name: ECSSettingModify, Burst: 10, Refill: 1, Actions: []string{"DeleteAccountSetting", "PutAccountSetting", "PutAccountSettingDefault"}},
	{Name: ECSSettingRead, Burst: 50, Refill: 20, Actions: []string{"ListAccountSettings"}},
	{Name: ECSClusterResourceModify, Burst: 100, Refill: 40, Actions: []string{"DeleteAttributes", "DeregisterContainerInstance", "ExecuteCommand", "PutAttributes", "RunTask", "StartTask", "StopTask", "UpdateContainerAgent", "UpdateContainerInstancesStates"}},
	{Name: ECSClusterResourceRead, Burst: 100, Refill: 20, Actions: []string{"DescribeContainerInstances", "DescribeTasks", "ListAttributes", "ListContainerInstances", "ListTasks"}},
	{Name: ECSAgentModify, Burst: 200, Refill: 120, Actions: []string{"RegisterContainerInstance", "SubmitAttachmentStateChanges", "SubmitContainerStateChange", "SubmitTaskStateChange"}},
	{Name: ECSServiceModify, Burst: 50, Refill: 5, Actions: []string{"CreateService", "DeleteService", "UpdateService"}},
	{Name: ECSServiceRead, Burst: 100, Refill: 20, Actions: []string{"DescribeServices", "ListServices"}},
	{Name: ECSServiceDeployment, Burst: 50, Refill: 20, Actions: []string{"DescribeServiceDeployments", "ListServiceDeployments"}},
	{Name: ECSServiceRevision, Burst: 50, Refill: 20, Actions: []string{"DescribeServiceRevisions"}},
	{Name: ECSTaskProtection, Burst: 200, Refill: 80, Actions: []string{"UpdateTaskProtection", "GetTaskProtection"}},
	{Name: ECSClusterServiceResourceRead, Burst: 10, Refill: 1, Actions: []string{"ListServicesByNamespace"}},
}
